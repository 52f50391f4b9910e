// Reading metrics.jsonl for the report (see report.h).
#include <fstream>

#include "data/records.h"
#include "rlcore/core/report/report.h"
#include "rlcore/error.h"

namespace rlcore::report {

MetricsHistory read_metrics_history(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError("cannot read metrics file '" + path + "'");
  MetricsHistory history;
  history.source = path;
  data::records::read_jsonl(in, path, [&history](const nlohmann::json& record, const std::string& where) {
    const auto step = record.find("step");
    if (step == record.end() || !step->is_number_integer()) {
      throw FormatError(where + ": missing or non-integer \"step\"");
    }
    for (const auto& [name, value] : record.items()) {
      if (name == "step" || value.is_null()) continue;
      if (!value.is_number()) throw FormatError(where + ": metric \"" + name + "\" is not a number or null");
      history.series[name].emplace_back(step->get<int64_t>(), value.get<double>());
    }
    history.last_record = record;
    ++history.records;
  });
  return history;
}

}  // namespace rlcore::report
