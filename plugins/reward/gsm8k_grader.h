// The `gsm8k` grader: verl's verl/utils/reward_score/gsm8k.py with identical
// results, plus the "#### <answer>" extraction that the arithmetic grader shares.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "rlcore/grader.h"

namespace rlcore::reward {

enum class Gsm8kMethod {
  kStrict,    // the last "#### <number>" in the response
  kFlexible,  // the last number anywhere in the response
};

// "strict" / "flexible", as verl spells them; nullopt for anything else.
std::optional<Gsm8kMethod> parse_gsm8k_method(std::string_view name);

struct Gsm8kOptions {
  Gsm8kMethod method = Gsm8kMethod::kStrict;  // How the answer is found: "strict" or "flexible".
  double format_score = 0.0;                  // Score when an answer is found but differs from the ground truth.
  double score = 1.0;                         // Score when the answer equals the ground truth.
};

// verl's extract_solution: only the last 300 characters are searched.
std::optional<std::string> extract_gsm8k_answer(std::string_view response, Gsm8kMethod method);

// Extras: "acc" (1 when correct) and "format_ok" (1 when an answer was found).
class Gsm8kGrader final : public Grader {
 public:
  explicit Gsm8kGrader(Gsm8kOptions options = {});

  GradeResult grade(std::string_view response, std::string_view ground_truth, std::string_view data_source,
                    const nlohmann::json& extra) const override;

 private:
  Gsm8kOptions options_;
};

}  // namespace rlcore::reward
