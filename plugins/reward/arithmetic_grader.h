// The `arithmetic` grader for rlcore's built-in synthetic task ("What is 12+345?"):
// the model ends with "#### <integer>", found by the gsm8k strict rule.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "rlcore/grader.h"

namespace rlcore::reward {

struct ArithmeticOptions {
  double score = 1.0;         // Score when the answer equals the ground truth as an integer.
  double format_score = 0.0;  // Score when a "#### " answer is found but is wrong or not an integer.
};

// The integer `text` spells as a canonical decimal ("-12", "0"), or nullopt if `text`
// is not -?[0-9]+. Leading zeros and "-0" are accepted; there is no size limit.
std::optional<std::string> canonical_integer(std::string_view text);

// Answers are read as gsm8k strict reads them: the last "#### " match in the last
// 300 characters, commas removed. So "#### 1,234" and "#### 007" are integers,
// "#### 72." and "#### 7.0" are found but wrong, and "#### +7" is no answer at all
// (the rule's regex has no "+"). The ground truth is trimmed, then read as -?[0-9]+.
// Extras: "acc" (1 when correct) and "format_ok" (1 when a "#### " answer was found).
class ArithmeticGrader final : public Grader {
 public:
  explicit ArithmeticGrader(ArithmeticOptions options = {});

  GradeResult grade(std::string_view response, std::string_view ground_truth, std::string_view data_source,
                    const nlohmann::json& extra) const override;

 private:
  ArithmeticOptions options_;
};

}  // namespace rlcore::reward
