// Private to the report: line charts as inline SVG text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rlcore/core/report/report.h"

namespace rlcore::report::svg {

struct ChartSeries {
  std::string name;
  std::vector<MetricPoint> points;  // by step; at least one
};

// One <svg> element: axes with round-number ticks (x: step), one coloured line per
// series and a legend naming each.
std::string line_chart(const std::string& title, const std::vector<ChartSeries>& series);

// `text` with & < > " ' escaped, for XML/HTML text and attribute values.
std::string escape(std::string_view text);

// A short decimal form for labels and tables ("0.25", "1.2e+04").
std::string format_number(double value);

}  // namespace rlcore::report::svg
