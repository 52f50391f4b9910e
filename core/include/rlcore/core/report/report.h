// `rlcore report`: a run's metrics.jsonl turned into one self-contained HTML page
// (inline SVG plots, no external scripts or styles) that can be mailed or archived.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/export.h"

namespace rlcore::report {

using MetricPoint = std::pair<int64_t, double>;  // (step, value)

// What metrics.jsonl holds: each metric's finite values by step (nulls are
// skipped), and the last record as written.
struct MetricsHistory {
  std::string source;                                      // the file read
  std::map<std::string, std::vector<MetricPoint>> series;  // in file order
  nlohmann::json last_record = nlohmann::json::object();
  int64_t records = 0;
};

// Reads metrics::JsonlMetricsSink's format: {"step": N, "<metric>": number|null, ...} per line.
// Throws IoError when the file cannot be read and FormatError naming the file and
// line for bad JSON, a missing or non-integer step, or a value that is not a number or null.
RLCORE_API MetricsHistory read_metrics_history(const std::string& path);

// One plot of the report: the metrics it draws, found by exact name or by prefix.
struct ReportPlot {
  std::string title;
  std::vector<std::string> names;     // exact metric names
  std::vector<std::string> prefixes;  // every metric starting with one of these
  bool optional = false;              // a run without these metrics gets no note (a mode's own plots)
};

// Reward, validation accuracy, KL, entropy, response length and the step-time
// breakdown; with a standalone rollout pool (docs/async.md), staleness and idle shares.
RLCORE_API const std::vector<ReportPlot>& default_report_plots();

// The metrics of `plot` that have data in `history`, sorted by name.
RLCORE_API std::vector<std::string> plot_metrics(const ReportPlot& plot, const MetricsHistory& history);

// The HTML page: one <svg> per plot with data, a note for each plot without, and a
// table of the last record's metrics.
RLCORE_API std::string render_report_html(const MetricsHistory& history, const std::string& title);

// Reads <run_dir>/metrics.jsonl and writes the page to `out_path` (default
// <run_dir>/report.html); returns the path written.
RLCORE_API std::string write_report(const std::string& run_dir, const std::string& out_path = "");

}  // namespace rlcore::report
