// The `prime_math` grader: verl 0.9.1's verl/utils/reward_score/prime_math/ (PRIME's
// math checker, after PRM800K and ToRA): the answer after "answer is" / the last
// \boxed{} / the last "is" or "=", compared by string normalisation, numbers
// (within 1e-4, also as a percentage) and tuples/intervals. verl's sympy,
// pylatexenc and eval() steps do not run here (docs/algorithms.md, "Graders").
#pragma once

#include <string>
#include <string_view>

#include "rlcore/grader.h"

namespace rlcore::reward {

struct PrimeMathVerdict {
  bool correct = false;
  std::string pred;  // the extracted answer (verl's third return value)
  // False here, but verl would have asked sympy, pylatexenc or eval() on the
  // way, which may have found the answer equivalent.
  bool undecided = false;
};

// match_answer: the extracted answer of a response.
std::string prime_match_answer(std::string_view response);

// math_normalize.normalize_answer (PRM800K's mathd normalisation).
std::string prime_normalize_answer(std::string_view answer);

// compute_score's verdict.
PrimeMathVerdict prime_math_verify(std::string_view response, std::string_view ground_truth);

// verl's prime_math.compute_score takes no options.
struct PrimeMathOptions {};

// Score 1.0 when correct, else 0.0 (default_compute_score's float(res[0])); extra "acc".
class PrimeMathGrader final : public Grader {
 public:
  GradeResult grade(std::string_view response, std::string_view ground_truth, std::string_view data_source,
                    const nlohmann::json& extra) const override;
};

}  // namespace rlcore::reward
