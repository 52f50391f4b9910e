// The `exact_match` grader: the whole response must equal the ground truth,
// for tasks whose answer is the entire completion (labels, short strings).
#pragma once

#include "rlcore/grader.h"

namespace rlcore::reward {

struct ExactMatchOptions {
  bool strip = true;           // Trim ASCII whitespace from both ends of response and ground truth.
  bool case_sensitive = true;  // When false, ASCII letters match either case (no Unicode folding).
  double score = 1.0;          // Score on a match; a mismatch scores 0.
};

// Extras: "acc" (1 on a match).
class ExactMatchGrader final : public Grader {
 public:
  explicit ExactMatchGrader(ExactMatchOptions options = {});

  GradeResult grade(std::string_view response, std::string_view ground_truth, std::string_view data_source,
                    const nlohmann::json& extra) const override;

 private:
  ExactMatchOptions options_;
};

}  // namespace rlcore::reward
