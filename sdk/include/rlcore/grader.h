// Grader: the `reward` plugin kind. Scores one response against its ground
// truth (verl's compute_score), returning a score and optional extra metrics.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "rlcore/export.h"

namespace rlcore {

struct GradeResult {
  double score = 0.0;
  // Named extras reported as metrics (e.g. "acc", "format_ok"); may be empty.
  std::map<std::string, double> extras;
};

class RLCORE_API Grader {
 public:
  static constexpr const char* kKind = "reward";

  virtual ~Grader();

  // Must be thread-safe and must not throw for any response text: a response
  // that cannot be parsed simply scores low.
  virtual GradeResult grade(std::string_view response, std::string_view ground_truth,
                            std::string_view data_source, const nlohmann::json& extra) const = 0;
};

}  // namespace rlcore
