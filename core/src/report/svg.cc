// SVG line charts for the report (see report/svg.h).
#include "report/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace rlcore::report::svg {
namespace {

constexpr double kWidth = 640;
constexpr double kPlotHeight = 260;
constexpr double kLeft = 64;
constexpr double kRight = 16;
constexpr double kTop = 32;
constexpr double kBottom = 36;  // below the plot area: the x tick labels
constexpr double kLegendRow = 18;
constexpr size_t kMaxMarkedPoints = 30;
// Tableau 10: distinguishable, and readable on white.
constexpr const char* kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

struct Range {
  double low;
  double high;
};

// Widens an empty range so a constant series still gets an axis.
Range widened(double low, double high) {
  if (high > low) return {low, high};
  const double pad = low == 0 ? 1.0 : std::abs(low) * 0.1;
  return {low - pad, high + pad};
}

// Keeps lines at the extremes off the frame.
Range padded(Range range) {
  const double pad = (range.high - range.low) * 0.05;
  return {range.low - pad, range.high + pad};
}

// About `count` ticks at 1, 2 or 5 times a power of ten, covering [low, high].
std::vector<double> nice_ticks(Range range, int count, double min_spacing) {
  const double rough = std::max((range.high - range.low) / count, min_spacing);
  const double magnitude = std::pow(10.0, std::floor(std::log10(rough)));
  double spacing = magnitude;
  for (const double factor : {1.0, 2.0, 5.0, 10.0}) {
    spacing = factor * magnitude;
    if (spacing >= rough) break;
  }
  std::vector<double> ticks;
  for (double tick = std::ceil(range.low / spacing - 1e-9) * spacing; tick <= range.high + spacing * 1e-9;
       tick += spacing) {
    ticks.push_back(std::abs(tick) < spacing * 1e-9 ? 0.0 : tick);
  }
  return ticks;
}

class Frame {
 public:
  Frame(Range x, Range y) : x_(x), y_(y) {}
  double x(double step) const { return kLeft + (step - x_.low) / (x_.high - x_.low) * (kWidth - kLeft - kRight); }
  double y(double value) const { return kTop + (y_.high - value) / (y_.high - y_.low) * kPlotHeight; }

 private:
  Range x_;
  Range y_;
};

void axes(std::ostringstream& svg, const Frame& frame, Range x_range, Range y_range) {
  const double bottom = kTop + kPlotHeight;
  for (const double tick : nice_ticks(y_range, 5, 0)) {
    const double y = frame.y(tick);
    svg << "<line x1='" << kLeft << "' y1='" << y << "' x2='" << kWidth - kRight << "' y2='" << y
        << "' stroke='#e5e5e5'/><text x='" << kLeft - 6 << "' y='" << y + 4 << "' text-anchor='end'>"
        << format_number(tick) << "</text>";
  }
  for (const double tick : nice_ticks(x_range, 6, 1.0)) {
    const double x = frame.x(tick);
    svg << "<line x1='" << x << "' y1='" << bottom << "' x2='" << x << "' y2='" << bottom + 4
        << "' stroke='#888'/><text x='" << x << "' y='" << bottom + 18 << "' text-anchor='middle'>"
        << format_number(tick) << "</text>";
  }
  svg << "<rect x='" << kLeft << "' y='" << kTop << "' width='" << kWidth - kLeft - kRight << "' height='"
      << kPlotHeight << "' fill='none' stroke='#888'/>";
  svg << "<text x='" << (kLeft + kWidth - kRight) / 2 << "' y='" << bottom + 32 << "' text-anchor='middle'>step</text>";
}

void line(std::ostringstream& svg, const Frame& frame, const ChartSeries& series, const char* color) {
  if (series.points.size() > 1) {
    svg << "<polyline fill='none' stroke-width='1.5' stroke='" << color << "' points='";
    for (const auto& [step, value] : series.points) {
      svg << frame.x(static_cast<double>(step)) << "," << frame.y(value) << " ";
    }
    svg << "'/>";
  }
  // Sparse series (validation every N steps) show where their points are.
  if (series.points.size() > kMaxMarkedPoints) return;
  for (const auto& [step, value] : series.points) {
    svg << "<circle cx='" << frame.x(static_cast<double>(step)) << "' cy='" << frame.y(value) << "' r='2.5' fill='"
        << color << "'/>";
  }
}

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string format_number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", value);
  return text;
}

std::string line_chart(const std::string& title, const std::vector<ChartSeries>& series) {
  double x_low = INFINITY, x_high = -INFINITY, y_low = INFINITY, y_high = -INFINITY;
  for (const auto& s : series) {
    for (const auto& [step, value] : s.points) {
      x_low = std::min(x_low, static_cast<double>(step));
      x_high = std::max(x_high, static_cast<double>(step));
      y_low = std::min(y_low, value);
      y_high = std::max(y_high, value);
    }
  }
  const Range x_range = widened(x_low, x_high);
  const Range y_range = padded(widened(y_low, y_high));
  const Frame frame(x_range, y_range);
  const double legend_top = kTop + kPlotHeight + kBottom + 8;
  const double height = legend_top + kLegendRow * static_cast<double>(series.size());

  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << kWidth << "' height='" << height << "' viewBox='0 0 "
      << kWidth << " " << height << "' font-family='sans-serif' font-size='11'>";
  svg << "<text x='" << kLeft << "' y='20' font-size='14' font-weight='bold'>" << escape(title) << "</text>";
  axes(svg, frame, x_range, y_range);
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
    line(svg, frame, series[i], color);
    const double y = legend_top + kLegendRow * static_cast<double>(i);
    svg << "<rect x='" << kLeft << "' y='" << y << "' width='12' height='3' fill='" << color << "'/><text x='"
        << kLeft + 18 << "' y='" << y + 5 << "'>" << escape(series[i].name) << " (last "
        << format_number(series[i].points.back().second) << ")</text>";
  }
  svg << "</svg>";
  return svg.str();
}

}  // namespace rlcore::report::svg
