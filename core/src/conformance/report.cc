// Prints conformance results: an aligned table with a summary line, or JSON.
#include <iomanip>
#include <map>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "conformance/conformance.h"

namespace rlcore::conformance {
namespace {

std::string number(const std::optional<double>& value) {
  if (!value) return "-";
  std::ostringstream out;
  out << std::setprecision(2) << *value;
  return out.str();
}

std::string seconds(double value) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << value << "s";
  return out.str();
}

std::map<Status, int> counts(const std::vector<CheckResult>& results) {
  std::map<Status, int> out;
  for (const auto& result : results) ++out[result.status];
  return out;
}

}  // namespace

void print_table(std::ostream& out, const std::vector<CheckResult>& results) {
  std::vector<std::vector<std::string>> rows = {
      {"COMPONENT", "CHECK", "STATUS", "ERROR", "TOLERANCE", "TIME", "DETAIL"}};
  for (const auto& r : results) {
    rows.push_back({r.kind + "/" + r.name, r.check, status_name(r.status), number(r.error), number(r.tolerance),
                    seconds(r.seconds), r.detail});
  }
  std::vector<size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
  auto c = counts(results);
  out << "\n"
      << results.size() << " checks: " << c[Status::kPass] << " passed, " << c[Status::kFail] << " failed, "
      << c[Status::kNotApplicable] << " not applicable, " << c[Status::kSkipped] << " skipped\n";
}

void print_json(std::ostream& out, const std::vector<CheckResult>& results) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json item = {{"kind", r.kind},
                           {"name", r.name},
                           {"plugin", r.plugin},
                           {"check", r.check},
                           {"status", status_name(r.status)},
                           {"seconds", r.seconds},
                           {"detail", r.detail}};
    item["error"] = r.error ? nlohmann::json(*r.error) : nlohmann::json();
    item["tolerance"] = r.tolerance ? nlohmann::json(*r.tolerance) : nlohmann::json();
    list.push_back(item);
  }
  auto c = counts(results);
  const nlohmann::json summary = {{"checks", results.size()},
                                  {"passed", c[Status::kPass]},
                                  {"failed", c[Status::kFail]},
                                  {"not_applicable", c[Status::kNotApplicable]},
                                  {"skipped", c[Status::kSkipped]}};
  out << nlohmann::json{{"results", list}, {"summary", summary}}.dump(2) << "\n";
}

}  // namespace rlcore::conformance
