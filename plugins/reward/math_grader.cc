// The `math` grader (see math_grader.h); the normalisation lives in math_normalize.cc.
#include "math_grader.h"

#include "answer_score.h"
#include "math_normalize.h"

namespace rlcore::reward {

MathGrader::MathGrader(MathOptions options) : options_(options) {}

GradeResult MathGrader::grade(std::string_view response, std::string_view ground_truth,
                              std::string_view /*data_source*/, const nlohmann::json& /*extra*/) const {
  // verl scores 0 wherever compute_score raises, e.g. remove_boxed on "\fbox{...}".
  std::optional<std::string> answer;
  if (const std::optional<std::string> boxed = last_boxed_only_string(response)) {
    answer = remove_boxed(*boxed);
  }
  const bool correct = answer && is_equiv(*answer, ground_truth);
  return score_answer(answer.has_value(), correct, options_.score, options_.format_score);
}

}  // namespace rlcore::reward
