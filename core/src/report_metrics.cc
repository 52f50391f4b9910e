// Reading metrics.jsonl for the report (see report.h).
#include <fstream>

#include "rlcore/core/report/report.h"
#include "rlcore/error.h"

namespace rlcore {

MetricsHistory read_metrics_history(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError("cannot read metrics file '" + path + "'");
  MetricsHistory history;
  history.source = path;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(number);
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw FormatError(where + ": bad JSON: " + e.what());
    }
    if (!record.is_object()) throw FormatError(where + ": expected a JSON object per line");
    const auto step = record.find("step");
    if (step == record.end() || !step->is_number_integer()) {
      throw FormatError(where + ": missing or non-integer \"step\"");
    }
    for (const auto& [name, value] : record.items()) {
      if (name == "step" || value.is_null()) continue;
      if (!value.is_number()) throw FormatError(where + ": metric \"" + name + "\" is not a number or null");
      history.series[name].emplace_back(step->get<int64_t>(), value.get<double>());
    }
    history.last_record = std::move(record);
    ++history.records;
  }
  return history;
}

}  // namespace rlcore
