// The `exact_match` grader (see exact_match_grader.h).
#include "exact_match_grader.h"

#include <algorithm>

#include "python_str.h"

namespace rlcore::reward {
namespace {

char lower_ascii_char(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool equal_ignoring_ascii_case(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](char x, char y) { return lower_ascii_char(x) == lower_ascii_char(y); });
}

}  // namespace

ExactMatchGrader::ExactMatchGrader(ExactMatchOptions options) : options_(options) {}

GradeResult ExactMatchGrader::grade(std::string_view response, std::string_view ground_truth,
                                    std::string_view /*data_source*/, const nlohmann::json& /*extra*/) const {
  if (options_.strip) {
    response = trim_ascii_whitespace(response);
    ground_truth = trim_ascii_whitespace(ground_truth);
  }
  const bool match =
      options_.case_sensitive ? response == ground_truth : equal_ignoring_ascii_case(response, ground_truth);
  GradeResult result;
  result.score = match ? options_.score : 0.0;
  result.extras["acc"] = match ? 1.0 : 0.0;
  return result;
}

}  // namespace rlcore::reward
