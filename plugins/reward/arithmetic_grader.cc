// The `arithmetic` grader (see arithmetic_grader.h). Integers are compared as
// canonical digit strings, so products of long operands never overflow.
#include "arithmetic_grader.h"

#include "answer_score.h"

#include <algorithm>

#include "gsm8k_grader.h"
#include "python_str.h"

namespace rlcore::reward {

std::optional<std::string> canonical_integer(std::string_view text) {
  const bool negative = starts_with(text, "-");
  std::string_view digits = negative ? text.substr(1) : text;
  if (digits.empty()) return std::nullopt;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  digits = digits.substr(std::min(digits.find_first_not_of('0'), digits.size() - 1));
  if (digits == "0") return std::string(digits);
  return negative ? "-" + std::string(digits) : std::string(digits);
}

ArithmeticGrader::ArithmeticGrader(ArithmeticOptions options) : options_(options) {}

GradeResult ArithmeticGrader::grade(std::string_view response, std::string_view ground_truth,
                                    std::string_view /*data_source*/, const nlohmann::json& /*extra*/) const {
  const std::optional<std::string> answer = extract_gsm8k_answer(response, Gsm8kMethod::kStrict);
  const std::optional<std::string> expected = canonical_integer(trim_ascii_whitespace(ground_truth));
  const std::optional<std::string> got = answer ? canonical_integer(*answer) : std::nullopt;
  // A ground truth that is not an integer matches nothing rather than throwing.
  const bool correct = got && expected && *got == *expected;
  return score_answer(answer.has_value(), correct, options_.score, options_.format_score);
}

}  // namespace rlcore::reward
