// The report page: which plots it has, and the HTML around them (see report.h).
#include <filesystem>
#include <fstream>
#include <sstream>

#include "report/svg.h"
#include "rlcore/core/report/report.h"
#include "rlcore/error.h"
#include "rlcore/metric_names.h"
#include "rlcore/string_join.h"

namespace rlcore::report {
namespace {

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:24px;color:#222}"
    ".plots{display:flex;flex-wrap:wrap;gap:16px}"
    ".note{color:#777}"
    "table{border-collapse:collapse;font-size:13px}"
    "td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}"
    "td.v{text-align:right;font-family:monospace}";

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

std::string describe_metrics(const ReportPlot& plot) {
  std::vector<std::string> parts = plot.names;
  for (const auto& prefix : plot.prefixes) parts.push_back(prefix + "*");
  return join(parts);
}

void last_step_table(std::ostringstream& html, const nlohmann::json& record) {
  html << "<h2>Last step";
  if (record.contains("step")) html << " (" << record["step"].dump() << ")";
  html << "</h2><table><tr><th>metric</th><th>value</th></tr>";
  for (const auto& [name, value] : record.items()) {
    if (name == "step") continue;
    html << "<tr><td>" << report::svg::escape(name) << "</td><td class='v'>"
         << (value.is_number() ? report::svg::format_number(value.get<double>()) : "null") << "</td></tr>";
  }
  html << "</table>";
}

}  // namespace

const std::vector<ReportPlot>& default_report_plots() {
  static const std::vector<ReportPlot> plots = {
      {"Reward", {metric_names::kCriticScoreMean, "critic/rewards/mean"}, {}},
      {"Validation accuracy", {}, {"val-core/", "val/"}},
      {"KL", {metric_names::kActorPpoKl, metric_names::kActorKlLoss, "critic/kl"}, {}},
      {"Entropy", {metric_names::kActorEntropy}, {}},
      {"Response length", {metric_names::kResponseLengthMean}, {}},
      {"Step time (s)", {}, {"timing_s/"}},
      {"Staleness (updates)",
       {metric_names::kAsyncStalenessMean, metric_names::kAsyncStalenessMax, metric_names::kFullyAsyncMaxPartialSpan},
       {},
       true},
      {"Idle share",
       {metric_names::kTrainerIdleRatio, metric_names::kRollouterIdleRatio, metric_names::kFullyAsyncPartialRatio},
       {},
       true},
  };
  return plots;
}

std::vector<std::string> plot_metrics(const ReportPlot& plot, const MetricsHistory& history) {
  std::vector<std::string> found;
  for (const auto& [name, points] : history.series) {  // a std::map: sorted by name
    bool wanted = false;
    for (const auto& exact : plot.names) wanted = wanted || name == exact;
    for (const auto& prefix : plot.prefixes) wanted = wanted || starts_with(name, prefix);
    if (wanted && !points.empty()) found.push_back(name);
  }
  return found;
}

std::string render_report_html(const MetricsHistory& history, const std::string& title) {
  std::ostringstream html;
  html << "<!DOCTYPE html><html><head><meta charset='utf-8'><title>" << report::svg::escape(title) << "</title><style>"
       << kStyle << "</style></head><body><h1>" << report::svg::escape(title) << "</h1><p>" << history.records
       << " records from " << report::svg::escape(history.source) << "</p><div class='plots'>";
  std::ostringstream notes;
  for (const ReportPlot& plot : default_report_plots()) {
    const std::vector<std::string> names = plot_metrics(plot, history);
    if (names.empty()) {
      if (plot.optional) continue;
      notes << "<p class='note'>No data for " << report::svg::escape(plot.title) << " ("
            << report::svg::escape(describe_metrics(plot)) << ").</p>";
      continue;
    }
    std::vector<report::svg::ChartSeries> series;
    for (const auto& name : names) series.push_back({name, history.series.at(name)});
    html << "<div>" << report::svg::line_chart(plot.title, series) << "</div>";
  }
  html << "</div>" << notes.str();
  last_step_table(html, history.last_record);
  html << "</body></html>\n";
  return html.str();
}

std::string write_report(const std::string& run_dir, const std::string& out_path) {
  const std::filesystem::path dir(run_dir);
  const MetricsHistory history = read_metrics_history((dir / "metrics.jsonl").string());
  if (history.records == 0) throw ValueError("'" + history.source + "' has no metrics records yet");
  const std::string path = out_path.empty() ? (dir / "report.html").string() : out_path;
  const std::string name = std::filesystem::absolute(dir).lexically_normal().filename().string();
  std::ofstream out(path);
  out << render_report_html(history, "rlcore run " + (name.empty() ? run_dir : name));
  out.flush();
  if (!out) throw IoError("cannot write report '" + path + "'");
  return path;
}

}  // namespace rlcore::report
