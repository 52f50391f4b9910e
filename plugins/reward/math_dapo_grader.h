// The `math_dapo` grader: verl 0.9.1's verl/utils/reward_score/math_dapo.py (DAPO,
// after lm-evaluation-harness's Minerva math): the last "Answer: ..." line of the
// response's last 300 characters, normalised, else the last \boxed{} of its last
// 100; 1.0 when right, -1.0 when not.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "rlcore/grader.h"

namespace rlcore::reward {

struct MathDapoOptions {
  // verl's strict_box_verify: only the last \boxed{} of the last 100 characters,
  // compared with the ground truth as it is (no normalisation).
  bool strict_box_verify = false;
};

// verl's verify(): whether the answer is right, and its `pred` (nullopt where
// verl's is None: strict_box_verify without a boxed answer).
struct MathDapoVerdict {
  bool correct = false;
  std::optional<std::string> pred;
};

// normalize_final_answer: the text after the last '=', verl's SUBSTITUTIONS and
// REMOVED_EXPRESSIONS, then its regex rewrites ($..$, \text{}, \boxed{}, \frac, \sqrt).
std::string normalize_final_answer(std::string_view final_answer);

// compute_score's verdict for `solution` (the whole response; clipped to its last
// 300 characters here, as verl does).
MathDapoVerdict math_dapo_verify(std::string_view solution, std::string_view ground_truth, bool strict_box_verify);

// Score 1.0 or -1.0 (verl's reward); extras "acc" (1 or 0) and "pred" when verl's
// pred string is a finite decimal number (a metric cannot hold text).
class MathDapoGrader final : public Grader {
 public:
  explicit MathDapoGrader(MathDapoOptions options = {});

  GradeResult grade(std::string_view response, std::string_view ground_truth, std::string_view data_source,
                    const nlohmann::json& extra) const override;

 private:
  MathDapoOptions options_;
};

}  // namespace rlcore::reward
