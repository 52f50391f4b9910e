// verl's math_dapo.py, one function per Python helper and in the same order; its
// regexes are spelled out as scans that match what Python's `re` matches.
#include "math_dapo_grader.h"

#include <cmath>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "python_str.h"
#include "python_unicode.h"

namespace rlcore::reward {
namespace {

constexpr std::size_t kSolutionTailChars = 300;  // compute_score: solution_str[-300:]
constexpr std::size_t kBoxTailChars = 100;       // is_correct_strict_box: pred[-100:]
constexpr std::string_view kInvalid = "[INVALID]";

constexpr std::pair<std::string_view, std::string_view> kSubstitutions[] = {
    {"an ", ""}, {"a ", ""},       {".$", "$"},           {"\\$", ""},          {"\\ ", ""},
    {" ", ""},   {"mbox", "text"}, {",\\text{and}", ","}, {"\\text{and}", ","}, {"\\text{m}", "\\text{}"},
};

constexpr std::string_view kRemovedExpressions[] = {
    "square",     "ways",       "integers",  "dollars",      "mph",
    "inches",     "hours",      "km",        "units",        "\\ldots",
    "sue",        "points",     "feet",      "minutes",      "digits",
    "cents",      "degrees",    "cm",        "gm",           "pounds",
    "meters",     "meals",      "edges",     "students",     "childrentickets",
    "multiples",  "\\text{s}",  "\\text{.}", "\\text{\ns}",  "\\text{}^2",
    "\\text{}^3", "\\text{\n}", "\\text{}",  "\\mathrm{th}", "^\\circ",
    "^{\\circ}",  "\\;",        ",\\!",      "{,}",          "\"",
    "\\dots",
};

std::size_t line_end(std::string_view text, std::size_t from) {
  const std::size_t end = text.find('\n', from);
  return end == std::string_view::npos ? text.size() : end;
}

// re.sub(r"(.*?)(\$)(.*?)(\$)(.*)", "$\3$", s): '.' stops at '\n', so every line
// with two '$' becomes "$<what lies between its first two '$'>$".
std::string keep_first_dollar_math(std::string_view text) {
  std::string out;
  for (std::size_t start = 0;;) {
    const std::size_t end = line_end(text, start);
    const std::string_view line = text.substr(start, end - start);
    const std::size_t first = line.find('$');
    const std::size_t second = first == std::string_view::npos ? first : line.find('$', first + 1);
    if (second == std::string_view::npos) {
      out.append(line);
    } else {
      out.append("$").append(line.substr(first + 1, second - first - 1)).append("$");
    }
    if (end == text.size()) return out;
    out.push_back('\n');
    start = end + 1;
  }
}

// re.sub(r"(\\<command>\{)(.*?)(\})", "\2", s), or with (.*) when `greedy`: the
// braces of each `open` are dropped when its line has a '}' after it, the first
// such '}' (lazy) or the line's last (greedy).
std::string unwrap_command(std::string_view text, std::string_view open, bool greedy) {
  std::string out;
  std::size_t pos = 0;
  for (std::size_t hit; (hit = text.find(open, pos)) != std::string_view::npos;) {
    const std::size_t inner = hit + open.size();
    const std::size_t end = line_end(text, inner);
    const std::string_view rest = text.substr(inner, end - inner);
    const std::size_t close = greedy ? rest.rfind('}') : rest.find('}');
    if (close == std::string_view::npos) {
      out.append(text.substr(pos, hit + 1 - pos));  // no match here: the scan moves on one character
      pos = hit + 1;
      continue;
    }
    out.append(text.substr(pos, hit - pos)).append(rest.substr(0, close));
    pos = inner + close + 1;
  }
  out.append(text.substr(pos));
  return out;
}

// re.sub(r"(frac)([^{])(.)", "frac{\2}{\3}", s): [^{] also takes a '\n', '.' does not.
std::string brace_frac(std::string_view text) {
  std::string out;
  std::size_t pos = 0;
  for (std::size_t hit; (hit = text.find("frac", pos)) != std::string_view::npos;) {
    const std::size_t a = hit + 4;
    if (a < text.size() && text[a] != '{') {
      const std::size_t a_size = utf8_char_size(text, a);
      const std::size_t b = a + a_size;
      if (b < text.size() && text[b] != '\n') {
        const std::size_t b_size = utf8_char_size(text, b);
        out.append(text.substr(pos, hit - pos)).append("frac{").append(text.substr(a, a_size)).append("}{");
        out.append(text.substr(b, b_size)).append("}");
        pos = b + b_size;
        continue;
      }
    }
    out.append(text.substr(pos, hit + 1 - pos));
    pos = hit + 1;
  }
  out.append(text.substr(pos));
  return out;
}

// re.sub(r"(sqrt)([^{])", "sqrt{\2}", s)
std::string brace_sqrt(std::string_view text) {
  std::string out;
  std::size_t pos = 0;
  for (std::size_t hit; (hit = text.find("sqrt", pos)) != std::string_view::npos;) {
    const std::size_t a = hit + 4;
    if (a < text.size() && text[a] != '{') {
      const std::size_t a_size = utf8_char_size(text, a);
      out.append(text.substr(pos, hit - pos)).append("sqrt{").append(text.substr(a, a_size)).append("}");
      pos = a + a_size;
      continue;
    }
    out.append(text.substr(pos, hit + 1 - pos));
    pos = hit + 1;
  }
  out.append(text.substr(pos));
  return out;
}

// One letter of (?i)Answer: Python's case-insensitive Unicode matching also lets
// U+017F (long s) match 's'.
bool letter_matches(char32_t c, char lower) {
  if (c == static_cast<char32_t>(lower) || c == static_cast<char32_t>(lower - 'a' + 'A')) return true;
  return lower == 's' && c == 0x17F;
}

// The end of "(?i)Answer\s*:\s*" at `pos` (before the [^\n]+ part), or npos.
std::size_t answer_marker_end(std::string_view text, std::size_t pos) {
  std::size_t size = 0;
  for (const char letter : std::string_view("answer")) {
    if (pos >= text.size() || !letter_matches(decode_utf8(text, pos, &size), letter)) return std::string_view::npos;
    pos += size;
  }
  while (pos < text.size() && python_isspace(decode_utf8(text, pos, &size))) pos += size;
  if (pos >= text.size() || text[pos] != ':') return std::string_view::npos;
  return pos + 1;
}

// re.findall(r"(?i)Answer\s*:\s*([^\n]+)", text)[-1], or nullopt without a match.
std::optional<std::string_view> last_minerva_answer(std::string_view text) {
  std::optional<std::string_view> last;
  std::size_t size = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t colon_end = answer_marker_end(text, pos);
    if (colon_end == std::string_view::npos) {
      pos += utf8_char_size(text, pos);
      continue;
    }
    // \s* takes the whole whitespace run unless that leaves nothing for [^\n]+;
    // then it backs off to the run's last character that is not '\n'.
    std::size_t capture = colon_end;
    while (capture < text.size() && python_isspace(decode_utf8(text, capture, &size))) capture += size;
    if (capture == text.size()) {
      capture = std::string_view::npos;
      for (std::size_t p = colon_end; p < text.size(); p += size) {
        decode_utf8(text, p, &size);
        if (text[p] != '\n') capture = p;
      }
      if (capture == std::string_view::npos) {
        pos += utf8_char_size(text, pos);
        continue;
      }
    }
    const std::size_t end = line_end(text, capture);
    last = text.substr(capture, end - capture);
    pos = end;
  }
  return last;
}

// math_dapo's last_boxed_only_string: from the last "\boxed{" to its matching '}'.
std::optional<std::string_view> last_boxed(std::string_view text) {
  const std::size_t start = text.rfind("\\boxed{");
  if (start == std::string_view::npos) return std::nullopt;
  std::ptrdiff_t open = 0;
  for (std::size_t i = start; i < text.size(); ++i) {
    if (text[i] == '{') ++open;
    if (text[i] == '}' && --open == 0) return text.substr(start, i - start + 1);
  }
  return std::nullopt;
}

struct Minerva {
  bool correct;
  std::string pred;
};

Minerva is_correct_minerva(std::string_view solution, std::string_view ground_truth) {
  const std::optional<std::string_view> extracted = last_minerva_answer(solution);
  std::string pred = normalize_final_answer(extracted ? *extracted : kInvalid);
  const bool correct = pred == normalize_final_answer(ground_truth);
  return {correct, std::move(pred)};
}

// is_correct_strict_box: the content of the last \boxed{} in the last 100
// characters, equal to the ground truth as given.
MathDapoVerdict is_correct_strict_box(std::string_view solution, std::string_view ground_truth) {
  const std::optional<std::string_view> boxed = last_boxed(utf8_suffix(solution, kBoxTailChars));
  if (!boxed) return {false, std::nullopt};
  std::string content(boxed->substr(7, boxed->size() - 8));  // remove_boxed: "\boxed{" ... "}"
  const bool correct = content == ground_truth;
  return {correct, std::move(content)};
}

// A pred that is a plain finite decimal number ("-3", "0.25", "1e5"), as a metric.
std::optional<double> numeric_pred(const std::string& pred) {
  if (pred.empty() || pred.find_first_not_of("0123456789+-.eE") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(pred.c_str(), &end);
  if (end != pred.c_str() + pred.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace

std::string normalize_final_answer(std::string_view final_answer) {
  const std::size_t equals = final_answer.rfind('=');
  std::string s(equals == std::string_view::npos ? final_answer : final_answer.substr(equals + 1));
  for (const auto& [before, after] : kSubstitutions) s = replace_all(s, before, after);
  for (const std::string_view expression : kRemovedExpressions) s = replace_all(s, expression, "");

  s = keep_first_dollar_math(s);
  s = unwrap_command(s, "\\text{", /*greedy=*/false);
  s = unwrap_command(s, "\\textbf{", /*greedy=*/false);
  s = unwrap_command(s, "\\overline{", /*greedy=*/false);
  s = unwrap_command(s, "\\boxed{", /*greedy=*/true);

  s = brace_frac(s);
  s = brace_sqrt(s);
  s = replace_all(s, "$", "");

  if (const std::string digits = replace_all(s, ",", ""); python_str_isdigit(digits)) s = digits;
  return std::string(python_strip(s));
}

MathDapoVerdict math_dapo_verify(std::string_view solution, std::string_view ground_truth, bool strict_box_verify) {
  solution = utf8_suffix(solution, kSolutionTailChars);
  if (strict_box_verify) return is_correct_strict_box(solution, ground_truth);

  // Minerva ("Answer: ...") first; the \boxed{} fallback only when it found nothing.
  Minerva minerva = is_correct_minerva(solution, ground_truth);
  if (minerva.pred != kInvalid) return {minerva.correct, std::move(minerva.pred)};
  MathDapoVerdict box = is_correct_strict_box(solution, ground_truth);
  if (box.pred) return box;
  return {minerva.correct, std::move(minerva.pred)};
}

MathDapoGrader::MathDapoGrader(MathDapoOptions options) : options_(options) {}

GradeResult MathDapoGrader::grade(std::string_view response, std::string_view ground_truth,
                                  std::string_view /*data_source*/, const nlohmann::json& /*extra*/) const {
  const MathDapoVerdict verdict = math_dapo_verify(response, ground_truth, options_.strict_box_verify);
  GradeResult result;
  result.score = verdict.correct ? 1.0 : -1.0;
  result.extras["acc"] = verdict.correct ? 1.0 : 0.0;
  if (verdict.pred) {
    if (const std::optional<double> value = numeric_pred(*verdict.pred)) result.extras["pred"] = *value;
  }
  return result;
}

}  // namespace rlcore::reward
