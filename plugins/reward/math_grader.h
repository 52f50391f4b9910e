// The `math` grader: verl's verl/utils/reward_score/math_reward.py (Hendrycks MATH):
// the last \boxed answer, compared with the ground truth after strip_string.
#pragma once

#include "rlcore/grader.h"

namespace rlcore::reward {

struct MathOptions {
  double score = 1.0;         // Score when the boxed answer is equivalent to the ground truth.
  double format_score = 0.0;  // Score when a boxed answer is found but not equivalent (verl: 0).
};

// Extras: "acc" (1 when equivalent) and "format_ok" (1 when a boxed answer was found).
class MathGrader final : public Grader {
 public:
  explicit MathGrader(MathOptions options = {});

  GradeResult grade(std::string_view response, std::string_view ground_truth, std::string_view data_source,
                    const nlohmann::json& extra) const override;

 private:
  MathOptions options_;
};

}  // namespace rlcore::reward
