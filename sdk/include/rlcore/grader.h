// Grader: the `reward` plugin kind. Scores one response against its ground
// truth (verl's compute_score), returning a score and optional extra metrics.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

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
  virtual GradeResult grade(std::string_view response, std::string_view ground_truth, std::string_view data_source,
                            const nlohmann::json& extra) const = 0;
};

// One sample for BatchGrader::grade_batch: the arguments of Grader::grade.
struct GradeRequest {
  std::string_view response;
  std::string_view ground_truth;
  std::string_view data_source;
  const nlohmann::json* extra = nullptr;  // may be null
};

// Optional capability of a Grader that scores many samples at once more
// cheaply than one by one (a subprocess, a remote service). A grader inherits
// it besides Grader; callers find it with dynamic_cast and otherwise call
// grade() per sample. Unlike grade(), grade_batch may throw rlcore::Error when
// the batch cannot be scored at all; it returns one result per request, in order.
class RLCORE_API BatchGrader {
 public:
  virtual ~BatchGrader();

  virtual std::vector<GradeResult> grade_batch(const std::vector<GradeRequest>& requests) const = 0;
};

}  // namespace rlcore
