// The `gsm8k` grader. The regexes of verl's gsm8k.py are matched by hand: they
// are simple enough, and a plain scan cannot blow up on a 1 MB response.
#include "gsm8k_grader.h"

#include "answer_score.h"

#include <algorithm>

#include "python_str.h"

namespace rlcore::reward {
namespace {

// verl's _SOLUTION_CLIP_CHARS, in code points like Python's len().
constexpr std::size_t kSolutionClipChars = 300;
constexpr std::string_view kAnswerMarker = "#### ";

bool is_number_char(char c) { return (c >= '0' && c <= '9') || c == '.' || c == ','; }

// Length of the match of `\-?[0-9\.\,]+` starting exactly at `pos`, 0 if none.
std::size_t number_match_size(std::string_view text, std::size_t pos) {
  std::size_t end = pos;
  if (end < text.size() && text[end] == '-') ++end;
  const std::size_t digits = end;
  while (end < text.size() && is_number_char(text[end])) ++end;
  // A lone "-" does not match: the regex backtracks and `[0-9\.\,]+` fails on it.
  return end == digits ? 0 : end - pos;
}

// re.findall("#### (\-?[0-9\.\,]+)", text)[-1]. A match can never start inside
// an earlier one, so keeping the last hit of a scan over every "#### " equals findall.
std::optional<std::string_view> last_strict_match(std::string_view text) {
  std::optional<std::string_view> last;
  for (std::size_t hit = text.find(kAnswerMarker); hit != std::string_view::npos;
       hit = text.find(kAnswerMarker, hit + 1)) {
    const std::size_t start = hit + kAnswerMarker.size();
    if (const std::size_t size = number_match_size(text, start); size > 0) {
      last = text.substr(start, size);
    }
  }
  return last;
}

// verl's loop over reversed(re.findall(...)) skipping ".": when every match is
// "." the loop variable is left on the first match, which is "." too.
std::optional<std::string_view> last_flexible_match(std::string_view text) {
  std::optional<std::string_view> first;
  std::optional<std::string_view> last_valid;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t size = number_match_size(text, pos);
    if (size == 0) {
      ++pos;
      continue;
    }
    const std::string_view match = text.substr(pos, size);
    if (!first) first = match;
    if (match != ".") last_valid = match;
    pos += size;
  }
  return last_valid ? last_valid : first;
}

}  // namespace

std::optional<Gsm8kMethod> parse_gsm8k_method(std::string_view name) {
  if (name == "strict") return Gsm8kMethod::kStrict;
  if (name == "flexible") return Gsm8kMethod::kFlexible;
  return std::nullopt;
}

std::optional<std::string> extract_gsm8k_answer(std::string_view response, Gsm8kMethod method) {
  const std::string_view tail = utf8_suffix(response, kSolutionClipChars);
  if (method == Gsm8kMethod::kFlexible) {
    // Flexible mode keeps "," in the answer, so "1,000" never equals "1000".
    const auto match = last_flexible_match(tail);
    return match ? std::optional<std::string>(*match) : std::nullopt;
  }
  const auto match = last_strict_match(tail);
  if (!match) return std::nullopt;
  // verl also strips "$", which the regex cannot have matched.
  std::string answer(*match);
  answer.erase(std::remove(answer.begin(), answer.end(), ','), answer.end());
  return answer;
}

Gsm8kGrader::Gsm8kGrader(Gsm8kOptions options) : options_(options) {}

GradeResult Gsm8kGrader::grade(std::string_view response, std::string_view ground_truth,
                               std::string_view /*data_source*/, const nlohmann::json& /*extra*/) const {
  const auto answer = extract_gsm8k_answer(response, options_.method);
  const bool correct = answer && *answer == ground_truth;
  return score_answer(answer.has_value(), correct, options_.score, options_.format_score);
}

}  // namespace rlcore::reward
