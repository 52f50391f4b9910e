// verl's prime_math (see prime_math_grader.h), one function per Python helper and
// in the same order. Where verl hands a string to sympy, pylatexenc or eval(),
// this file answers "undecided" and the caller scores 0.
#include "prime_math_grader.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "math_normalize.h"
#include "python_str.h"
#include "python_unicode.h"

namespace rlcore::reward {
namespace {

constexpr double kTolerance = 1e-4;                // math_equal's tolerance
constexpr std::size_t kMaxPredictionChars = 1000;  // math_equal cuts longer predictions
constexpr std::string_view kTupleChars = "()[]";

// Python raised: compute_score catches it and scores 0.
struct PythonRaised {};
// verl would eval() the string, which may raise (score 0) or not: rlcore cannot tell.
struct Undecidable {};

// A comparison's outcome; kUndecided: verl would ask sympy here.
enum class Eq { kFalse, kTrue, kUndecided };

Eq all_of(const std::vector<Eq>& items) {
  bool undecided = false;
  for (const Eq item : items) {
    if (item == Eq::kFalse) return Eq::kFalse;
    undecided = undecided || item == Eq::kUndecided;
  }
  return undecided ? Eq::kUndecided : Eq::kTrue;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// str.lower(), ASCII letters only.
std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// The first / last character (a whole UTF-8 sequence) of a non-empty text.
std::string_view first_char(std::string_view text) { return text.substr(0, utf8_char_size(text, 0)); }
std::string_view last_char(std::string_view text) { return utf8_suffix(text, 1); }

// str.strip(chars) for ASCII `chars`.
std::string_view strip_chars(std::string_view text, std::string_view chars) {
  const std::size_t first = text.find_first_not_of(chars);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(chars) - first + 1);
}

std::string remove_chars(std::string_view text, std::string_view chars) {
  std::string out;
  for (const char c : text) {
    if (chars.find(c) == std::string_view::npos) out.push_back(c);
  }
  return out;
}

// float(text): Python's float() of a str (ASCII digits; underscores between digits,
// inf, infinity and nan in any case, surrounding whitespace).
std::optional<double> python_float(std::string_view text) {
  const std::string_view s = python_strip(text);
  std::size_t p = 0;
  std::string clean;
  if (p < s.size() && (s[p] == '+' || s[p] == '-')) clean.push_back(s[p++]);
  const std::string word = ascii_lower(s.substr(p));
  const double sign = !clean.empty() && clean[0] == '-' ? -1.0 : 1.0;
  if (word == "inf" || word == "infinity") return sign * std::numeric_limits<double>::infinity();
  if (word == "nan") return std::numeric_limits<double>::quiet_NaN();
  const auto digits = [&] {
    if (p >= s.size() || !is_digit(s[p])) return false;
    clean.push_back(s[p++]);
    while (p < s.size()) {
      if (is_digit(s[p])) {
        clean.push_back(s[p++]);
      } else if (s[p] == '_' && p + 1 < s.size() && is_digit(s[p + 1])) {
        ++p;
      } else {
        break;
      }
    }
    return true;
  };
  bool mantissa = digits();
  if (p < s.size() && s[p] == '.') {
    clean.push_back(s[p++]);
    mantissa = digits() || mantissa;
  }
  if (!mantissa) return std::nullopt;
  if (p < s.size() && (s[p] == 'e' || s[p] == 'E')) {
    clean.push_back(s[p++]);
    if (p < s.size() && (s[p] == '+' || s[p] == '-')) clean.push_back(s[p++]);
    if (!digits()) return std::nullopt;
  }
  if (p != s.size()) return std::nullopt;
  return std::strtod(clean.c_str(), nullptr);
}

// str(int(x)) of an integral double, exactly (Python ints are unbounded).
std::string exact_integer_string(double x) {
  if (std::fabs(x) < 9e18) return std::to_string(static_cast<int64_t>(x));
  int exponent = 0;
  const double mantissa = std::frexp(std::fabs(x), &exponent);
  auto bits = static_cast<uint64_t>(std::ldexp(mantissa, 53));
  exponent -= 53;
  std::vector<uint32_t> limbs;  // base 1e9, least significant first
  for (; bits > 0; bits /= 1000000000) limbs.push_back(static_cast<uint32_t>(bits % 1000000000));
  for (; exponent > 0; --exponent) {
    uint64_t carry = 0;
    for (uint32_t& limb : limbs) {
      const uint64_t value = static_cast<uint64_t>(limb) * 2 + carry;
      limb = static_cast<uint32_t>(value % 1000000000);
      carry = value / 1000000000;
    }
    if (carry > 0) limbs.push_back(static_cast<uint32_t>(carry));
  }
  std::string out = x < 0 ? "-" : "";
  out += std::to_string(limbs.back());
  for (std::size_t i = limbs.size() - 1; i-- > 0;) {
    const std::string part = std::to_string(limbs[i]);
    out += std::string(9 - part.size(), '0') + part;
  }
  return out;
}

// _is_int: abs(x - int(round(x))) <= 1e-7 (round half to even; inf and nan raise, so false).
bool python_is_int(double x) { return std::isfinite(x) && std::fabs(x - std::nearbyint(x)) <= 1e-7; }

// math.isclose(a, b, rel_tol=tolerance)
bool isclose(double a, double b, double tolerance) {
  if (a == b) return true;
  if (std::isinf(a) || std::isinf(b)) return false;
  const double diff = std::fabs(b - a);
  return diff <= std::fabs(tolerance * b) || diff <= std::fabs(tolerance * a);
}

// re.search(r"^\\text\{(?P<text>.+?)\}$", text): the inside, or nullopt.
std::optional<std::string_view> enclosing_text(std::string_view text) {
  constexpr std::string_view kOpen = "\\text{";
  if (!starts_with(text, kOpen)) return std::nullopt;
  std::string_view body = text.substr(kOpen.size());
  if (!body.empty() && body.back() == '\n') body.remove_suffix(1);  // `$` also matches before a final '\n'
  if (body.size() < 2 || body.back() != '}') return std::nullopt;
  const std::string_view inside = body.substr(0, body.size() - 1);
  if (contains(inside, "\n")) return std::nullopt;
  return inside;
}

// _strip_properly_formatted_commas: r"(\d)(,)(\d\d\d)($|\D)" -> r"\1\3\4" until nothing changes.
std::string strip_formatted_commas(std::string text) {
  for (;;) {
    std::string out;
    std::size_t i = 0;
    while (i < text.size()) {
      if (is_digit(text[i]) && i + 4 < text.size() && text[i + 1] == ',' && is_digit(text[i + 2]) &&
          is_digit(text[i + 3]) && is_digit(text[i + 4]) && (i + 5 == text.size() || !is_digit(text[i + 5]))) {
        out.push_back(text[i]);
        out.append(text, i + 2, 3);
        const std::size_t next = i + 5 == text.size() ? i + 5 : i + 5 + utf8_char_size(text, i + 5);
        out.append(text, i + 5, next - (i + 5));
        i = next;
        continue;
      }
      out.push_back(text[i++]);
    }
    if (out == text) return out;
    text = std::move(out);
  }
}

bool str_is_int(const std::string& text) {
  const std::optional<double> value = python_float(strip_formatted_commas(text));
  return value && python_is_int(*value);
}

// _is_frac: re.search(r"^-?[0-9]+.?/0*[1-9][0-9]*.?$", text)
bool is_frac(std::string_view s) {
  const auto ends_ok = [&](std::size_t p) {  // .?$ : nothing, or one character, then maybe a final '\n'
    std::string_view rest = s.substr(p);
    if (rest.empty() || rest == "\n") return true;
    const std::size_t one = utf8_char_size(rest, 0);
    if (rest[0] == '\n') return false;
    rest.remove_prefix(one);
    return rest.empty() || rest == "\n";
  };
  const auto denominator = [&](std::size_t p) {  // 0*[1-9][0-9]*.?$
    while (p < s.size() && s[p] == '0') ++p;
    if (p >= s.size() || s[p] < '1' || s[p] > '9') return false;
    while (p < s.size() && is_digit(s[p])) ++p;
    return ends_ok(p);
  };
  std::size_t p = !s.empty() && s[0] == '-' ? 1 : 0;
  const std::size_t digits = p;
  while (p < s.size() && is_digit(s[p])) ++p;
  if (p == digits) return false;
  if (p < s.size() && s[p] == '/' && denominator(p + 1)) return true;
  if (p < s.size() && s[p] != '\n') {
    const std::size_t after = p + utf8_char_size(s, p);
    if (after < s.size() && s[after] == '/' && denominator(after + 1)) return true;
  }
  return false;
}

// re.sub(f"{unit}(es)?(s)? *(\\^[0-9]+)?", "", text)
std::string remove_unit(std::string_view text, std::string_view unit) {
  std::string out;
  std::size_t pos = 0;
  for (std::size_t hit; (hit = text.find(unit, pos)) != std::string_view::npos;) {
    std::size_t p = hit + unit.size();
    if (text.substr(p, 2) == "es") p += 2;
    if (p < text.size() && text[p] == 's') ++p;
    while (p < text.size() && text[p] == ' ') ++p;
    if (p + 1 < text.size() && text[p] == '^' && is_digit(text[p + 1])) {
      ++p;
      while (p < text.size() && is_digit(text[p])) ++p;
    }
    out.append(text.substr(pos, hit - pos));
    pos = p;
  }
  out.append(text.substr(pos));
  return out;
}

// re.sub(<head> *<tail>, "", text) for literal head and tail: "^ \\circ", ",\\!  ".
std::string remove_after_spaces(std::string_view text, std::string_view head, std::string_view tail) {
  std::string out;
  std::size_t pos = 0;
  for (std::size_t hit; (hit = text.find(head, pos)) != std::string_view::npos;) {
    std::size_t p = hit + head.size();
    while (p < text.size() && text[p] == ' ') ++p;
    if (text.substr(p, tail.size()) != tail) {
      out.append(text.substr(pos, hit + 1 - pos));
      pos = hit + 1;
      continue;
    }
    p += tail.size();
    out.append(text.substr(pos, hit - pos));
    pos = p;
  }
  out.append(text.substr(pos));
  return out;
}

// re.sub(r"([0-9]) +([0-9])", r"\1+\2", text): "7 3/4" -> "7+3/4"
std::string inject_mixed_numbers(std::string_view text) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    if (is_digit(text[i]) && i + 1 < text.size() && text[i + 1] == ' ') {
      std::size_t j = i + 1;
      while (j < text.size() && text[j] == ' ') ++j;
      if (j < text.size() && is_digit(text[j])) {
        out.push_back(text[i]);
        out.push_back('+');
        out.push_back(text[j]);
        i = j + 1;
        continue;
      }
    }
    out.push_back(text[i++]);
  }
  return out;
}

// _normalize; nullopt where verl hands the string to pylatexenc (a '\' left).
std::optional<std::string> normalize_expr(std::string_view answer) {
  std::string expr(answer);
  if (const std::optional<std::string_view> inside = enclosing_text(expr)) expr = std::string(*inside);
  expr = replace_all(expr, "\\%", "%");
  expr = replace_all(expr, "\\$", "$");
  expr = replace_all(expr, "$", "");
  expr = replace_all(expr, "%", "");
  expr = replace_all(expr, " or ", " , ");
  expr = replace_all(expr, " and ", " , ");
  expr = replace_all(expr, "million", "*10^6");
  expr = replace_all(expr, "billion", "*10^9");
  expr = replace_all(expr, "trillion", "*10^12");
  for (const std::string_view unit : {"degree", "cm", "centimeter", "meter", "mile", "second", "minute", "hour", "day",
                                      "week", "month", "year", "foot", "feet", "inch", "yard", "liter"}) {
    expr = remove_unit(expr, unit);
  }
  expr = remove_after_spaces(expr, "^", "\\circ");  // re.sub(r"\^ *\\circ", "", expr)
  if (!expr.empty() && expr.front() == '{' && expr.back() == '}') expr = expr.substr(1, expr.size() - 2);
  expr = remove_after_spaces(expr, ",\\!", "");  // re.sub(",\\\\! *", "", expr)
  if (const std::optional<double> value = python_float(expr); value && python_is_int(*value)) {
    expr = exact_integer_string(std::nearbyint(*value));
  }
  if (contains(expr, "\\")) return std::nullopt;  // _parse_latex: pylatexenc's latex2text, then sympy's names
  std::string no_space_after_minus;
  for (std::size_t i = 0; i < expr.size(); ++i) {
    no_space_after_minus.push_back(expr[i]);
    if (expr[i] == '-') {
      while (i + 1 < expr.size() && expr[i + 1] == ' ') ++i;
    }
  }
  expr = ascii_lower(inject_mixed_numbers(no_space_after_minus));
  if (str_is_int(expr)) expr = exact_integer_string(std::trunc(python_float(replace_all(expr, ",", "")).value_or(0)));
  return expr;
}

std::vector<std::string> split_tuple(const std::string& expr) {
  const std::string stripped = strip_formatted_commas(expr);
  if (stripped.empty()) return {};
  const std::string_view s = stripped;
  if (utf8_length(s) > 2 && kTupleChars.find(s.front()) != std::string_view::npos &&
      kTupleChars.find(s.back()) != std::string_view::npos &&
      s.substr(1, s.size() - 2).find_first_of(kTupleChars) == std::string_view::npos) {
    std::vector<std::string> elements;
    for (const std::string_view piece : split(s.substr(1, s.size() - 2), ",")) {
      elements.emplace_back(python_strip(piece));
    }
    return elements;
  }
  return {stripped};
}

// should_allow_eval: when false, verl does not call sympy and the answer is false.
bool should_allow_eval(const std::string& expr) {
  const std::string letters = replace_all(replace_all(expr, "sqrt", ""), "frac", "");
  std::string distinct;
  for (const char c : letters) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter && distinct.find(c) == std::string::npos) distinct.push_back(c);
  }
  if (distinct.size() > 2 || contains(expr, "^{") || contains(expr, "^(")) return false;
  for (std::size_t i = 0; i + 1 < expr.size(); ++i) {
    if (expr[i] != '^' || !is_digit(expr[i + 1])) continue;
    std::size_t j = i + 1;
    while (j < expr.size() && is_digit(expr[j])) ++j;
    if (j - i - 1 >= 2 || (j < expr.size() && expr[j] == '^')) return false;  // \^[0-9][0-9]+ or \^[0-9]+\^
  }
  return true;
}

// What sympy.simplify("(a)-(b)") == 0 says for two plain decimals ("-2.50", "7",
// ".5") of at most 15 significant digits: sympy parses both as 15-digit Floats,
// i.e. as the doubles they round to, so they are equal exactly when those are.
// nullopt for anything else (sympy's business).
std::optional<bool> plain_decimals_equal(std::string_view a, std::string_view b) {
  const auto parse = [](std::string_view text) -> std::optional<double> {
    const std::string_view s = python_strip(text);
    std::size_t p = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
    std::size_t digits = 0;
    std::size_t significant = 0;
    bool dot = false;
    for (; p < s.size(); ++p) {
      if (s[p] == '.' && !dot) {
        dot = true;
      } else if (is_digit(s[p])) {
        ++digits;
        if (significant > 0 || s[p] != '0') ++significant;
      } else {
        return std::nullopt;
      }
    }
    if (digits == 0 || significant > 15) return std::nullopt;
    return std::strtod(std::string(s).c_str(), nullptr);
  };
  const std::optional<double> x = parse(a);
  const std::optional<double> y = parse(b);
  if (!x || !y) return std::nullopt;
  return *x == *y;
}

// grade_answer
Eq grade_answer(std::string_view given, std::string_view truth) {
  if (prime_normalize_answer(truth) == prime_normalize_answer(given)) return Eq::kTrue;
  const std::optional<std::string> truth_n = normalize_expr(truth);
  const std::optional<std::string> given_n = normalize_expr(given);
  if (!truth_n || !given_n) return Eq::kUndecided;
  if (*truth_n == *given_n) return Eq::kTrue;
  if (given_n->empty()) return Eq::kFalse;
  const std::vector<std::string> truth_elems = split_tuple(*truth_n);
  const std::vector<std::string> given_elems = split_tuple(*given_n);
  if ((truth_elems.size() > 1 &&
       (first_char(*truth_n) != first_char(*given_n) || last_char(*truth_n) != last_char(*given_n))) ||
      truth_elems.size() != given_elems.size()) {
    return Eq::kFalse;
  }
  std::vector<Eq> results;
  for (std::size_t i = 0; i < truth_elems.size(); ++i) {
    const std::string& t = truth_elems[i];
    const std::string& g = given_elems[i];
    if (is_frac(t) && is_frac(g)) {
      results.push_back(t == g ? Eq::kTrue : Eq::kFalse);  // unreduced fractions must match as written
    } else if (str_is_int(t) != str_is_int(g)) {
      results.push_back(Eq::kFalse);
    } else if (!should_allow_eval("(" + t + ")-(" + g + ")")) {
      results.push_back(Eq::kFalse);
    } else if (const auto same = plain_decimals_equal(t, g)) {
      results.push_back(*same ? Eq::kTrue : Eq::kFalse);
    } else {
      results.push_back(Eq::kUndecided);  // are_equal_under_sympy
    }
  }
  return all_of(results);
}

// A value in math_equal: a str, or the int that handle_base makes of "<x>_<base>".
struct Value {
  std::string text;
  bool is_int = false;
  double number = 0;
};

// re.match(r"\d+(\.\d+)?(%|\\%)$", text) at the start; `$` also before a final '\n'.
bool is_plain_percent(std::string_view s) {
  std::size_t p = 0;
  while (p < s.size() && is_digit(s[p])) ++p;
  if (p == 0) return false;
  if (p + 1 < s.size() && s[p] == '.' && is_digit(s[p + 1])) {
    p += 1;
    while (p < s.size() && is_digit(s[p])) ++p;
  }
  std::string_view rest = s.substr(p);
  if (!rest.empty() && rest.back() == '\n') rest.remove_suffix(1);
  return rest == "%" || rest == "\\%";
}

// grader.normalize(answer, pi)
Value normalize_value(Value answer) {
  if (answer.is_int) return answer;
  const std::string& s = answer.text;
  if (s.size() >= 2 && s[0] == '$' && is_digit(s[1])) return Value{s.substr(1)};
  if (is_plain_percent(s)) return Value{replace_all(replace_all(s, "\\%", ""), "%", "")};
  if (contains(s, "_")) {  // handle_base: int(float(x.split("_")[0]))
    const std::optional<double> value = python_float(split(s, "_").front());
    if (!value || !std::isfinite(*value)) throw PythonRaised{};
    const double truncated = std::trunc(*value);
    return Value{exact_integer_string(truncated), true, truncated};
  }
  if (contains(s, "\\pi")) throw Undecidable{};  // handle_pi: eval()
  return answer;
}

// is_digit: float() of the text without "{,}" (if any) or else without commas.
std::optional<double> numeric(const Value& value) {
  if (contains(value.text, "{,}")) return python_float(replace_all(value.text, "{,}", ""));
  return python_float(replace_all(value.text, ",", ""));
}

// format_intervals: sympy's Interval spellings as brackets.
std::string format_intervals(const std::string& prediction) {
  static const std::pair<std::string_view, std::pair<std::string_view, std::string_view>> kSpellings[] = {
      {"Interval(", {"[", "]"}},
      {"Interval.Ropen(", {"[", ")"}},
      {"Interval.Lopen(", {"(", "]"}},
      {"Interval.open(", {"(", ")"}},
  };
  for (const auto& [open, brackets] : kSpellings) {
    std::string_view s = prediction;
    if (!starts_with(s, open)) continue;
    if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
    if (s.size() < open.size() + 1 || s.back() != ')') continue;
    const std::string_view inner = s.substr(open.size(), s.size() - open.size() - 1);
    if (contains(inner, "\n")) continue;
    return std::string(brackets.first).append(inner).append(brackets.second);
  }
  return prediction;
}

Eq math_equal(Value prediction, Value reference);

Eq math_equal_strings(std::string_view prediction, std::string_view reference) {
  return math_equal(Value{std::string(prediction)}, Value{std::string(reference)});
}

// Each pair compared (all of them, as verl's list comprehension does), then all().
Eq all_parts_equal(const std::vector<std::string_view>& predictions, const std::vector<std::string_view>& references) {
  std::vector<Eq> results;
  for (std::size_t i = 0; i < predictions.size(); ++i) {
    results.push_back(math_equal_strings(predictions[i], references[i]));
  }
  return all_of(results);
}

std::vector<std::string_view> stripped_parts(std::string_view text) {
  std::vector<std::string_view> parts = split(text, ",");
  for (std::string_view& part : parts) part = python_strip(part);
  return parts;
}

// grader.math_equal with verl's defaults (percentages included, tolerance 1e-4).
Eq math_equal(Value prediction, Value reference) {
  prediction = normalize_value(std::move(prediction));
  reference = normalize_value(std::move(reference));
  if (!prediction.is_int && utf8_length(prediction.text) > kMaxPredictionChars) {
    std::size_t end = 0;
    for (std::size_t chars = 0; chars < kMaxPredictionChars; ++chars) end += utf8_char_size(prediction.text, end);
    prediction.text.resize(end);
  }
  if (!prediction.is_int && !reference.is_int) {
    if (ascii_lower(python_strip(prediction.text)) == ascii_lower(python_strip(reference.text))) return Eq::kTrue;
    if (replace_all(prediction.text, " ", "") == replace_all(reference.text, " ", "")) return Eq::kTrue;
  }
  const std::optional<double> p = numeric(prediction);
  const std::optional<double> r = numeric(reference);
  if (p && r) {
    for (const double item : {*r / 100, *r, *r * 100}) {
      if (isclose(item, *p, kTolerance)) return Eq::kTrue;
    }
    return Eq::kFalse;
  }
  if (!prediction.is_int && prediction.text.empty()) return Eq::kFalse;

  const std::string ref(python_strip(reference.text));
  const std::string pred = format_intervals(std::string(python_strip(prediction.text)));
  std::string_view pred_str = pred;
  std::string_view ref_str = ref;
  if ((starts_with(pred, "[") && pred.back() == ']' && !starts_with(ref, "(")) ||
      (starts_with(pred, "(") && pred.back() == ')' && !starts_with(ref, "["))) {
    pred_str = strip_chars(pred_str, "[]()");
    ref_str = strip_chars(ref_str, "[]()");
  }
  if (remove_chars(pred_str, "{}()") == remove_chars(ref_str, "{}()")) return Eq::kTrue;

  bool undecided = false;
  if (!pred.empty() && !ref.empty() && (pred[0] == '(' || pred[0] == '[') &&
      (pred.back() == ')' || pred.back() == ']') && pred[0] == ref[0] && pred.back() == ref.back()) {
    const std::vector<std::string_view> pred_parts = split(std::string_view(pred).substr(1, pred.size() - 2), ",");
    const std::vector<std::string_view> ref_parts = split(std::string_view(ref).substr(1, ref.size() - 2), ",");
    if (pred_parts.size() == ref_parts.size()) {
      const Eq parts = all_parts_equal(pred_parts, ref_parts);
      if (parts == Eq::kTrue) return Eq::kTrue;
      undecided = parts == Eq::kUndecided;
    }
  }
  if (contains(pred, ",") && contains(ref, ",")) {
    const std::vector<std::string_view> pred_parts = stripped_parts(pred);
    const std::vector<std::string_view> ref_parts = stripped_parts(ref);
    if (pred_parts.size() == ref_parts.size()) {
      const Eq parts = all_parts_equal(pred_parts, ref_parts);
      return parts == Eq::kFalse && undecided ? Eq::kUndecided : parts;
    }
  }
  if (starts_with(pred, "Point")) {
    if (ref.empty()) throw PythonRaised{};  // reference[0] of ""
    if (ref[0] == '(' && ref.back() == ')') {
      const std::size_t open = pred.find('(');
      const std::size_t from = open == std::string::npos ? 0 : open + 1;
      const std::string_view inner =
          std::string_view(pred).substr(from, pred.size() - 1 - std::min(from, pred.size() - 1));
      const std::vector<std::string_view> pred_parts = split(inner, ",");
      const std::vector<std::string_view> ref_parts = split(std::string_view(ref).substr(1, ref.size() - 2), ",");
      if (pred_parts.size() == ref_parts.size()) {
        const Eq parts = all_parts_equal(pred_parts, ref_parts);
        if (parts == Eq::kTrue) return Eq::kTrue;
        undecided = undecided || parts == Eq::kUndecided;
      }
    }
  }
  if (contains(ref, "\\begin{pmatrix}") && starts_with(pred, "[") && pred.back() == ']' &&
      !starts_with(pred, "Matrix")) {
    throw Undecidable{};  // eval(prediction): raises (score 0) or compares the rows
  }
  return Eq::kUndecided;  // symbolic_equal (and a "Matrix" prediction): sympy's parse_expr and simplify
}

}  // namespace

std::string prime_normalize_answer(std::string_view answer) {
  std::string_view stripped = python_strip(answer);
  std::string text(stripped);
  if (const std::optional<std::string_view> inside = enclosing_text(text)) text = std::string(python_strip(*inside));
  std::optional<std::string> normalized = strip_string(text);
  return normalized ? std::move(*normalized) : text;
}

std::string prime_match_answer(std::string_view response_in) {
  std::string response(response_in);
  const auto cut_after = [&](std::string_view marker) {
    const std::size_t at = ascii_lower(response).rfind(marker);
    if (at != std::string::npos) {
      response = std::string(python_strip(std::string_view(response).substr(at + marker.size())));
    }
  };
  const auto cut_before = [&](std::string_view marker) {
    const std::size_t at = ascii_lower(response).rfind(marker);
    if (at != std::string::npos) response = std::string(python_strip(std::string_view(response).substr(0, at)));
  };
  for (const std::string_view marker : {"answer:", "answer is", "answers are"}) cut_after(marker);
  for (const std::string_view marker : {"is answer", "is the answer", "are answers", "are the answers"})
    cut_before(marker);

  // _last_boxed_only_string: the stripped inside of the last \boxed (or \fbox) braces.
  std::size_t start = response.rfind("\\boxed");
  if (start == std::string::npos) start = response.rfind("\\fbox");
  if (start != std::string::npos) {
    std::optional<std::size_t> left;
    std::ptrdiff_t open = 0;
    for (std::size_t i = start; i < response.size(); ++i) {
      if (response[i] == '{') {
        ++open;
        if (!left) left = i;
      } else if (response[i] == '}' && --open == 0) {
        if (left) {
          const std::string_view inside = python_strip(std::string_view(response).substr(*left + 1, i - *left - 1));
          if (!inside.empty()) response = std::string(inside);
        }
        break;
      }
    }
  }
  if (contains(response, ". ")) cut_before(". ");
  for (const std::string_view marker :
       {"be ", "is ", "are ", "=", ": ", "get ", "be\n", "is\n", "are\n", ":\n", "get\n"}) {
    cut_after(marker);
  }
  return response;
}

PrimeMathVerdict prime_math_verify(std::string_view response, std::string_view ground_truth) {
  PrimeMathVerdict verdict;
  verdict.pred = prime_match_answer(response);
  const Eq graded = grade_answer(verdict.pred, ground_truth);
  if (graded == Eq::kTrue) {
    verdict.correct = true;
    return verdict;
  }
  bool undecided = graded == Eq::kUndecided;
  if (contains(verdict.pred, "\\pi") || contains(ground_truth, "\\pi")) {
    undecided = true;  // math_equal with pi = math.pi and 3.14: handle_pi's eval()
  } else {
    try {
      const Eq equal = math_equal(Value{verdict.pred}, Value{std::string(ground_truth)});
      verdict.correct = equal == Eq::kTrue;
      undecided = undecided || equal == Eq::kUndecided;
    } catch (const PythonRaised&) {
    } catch (const Undecidable&) {
      undecided = true;
    }
  }
  verdict.undecided = !verdict.correct && undecided;
  return verdict;
}

GradeResult PrimeMathGrader::grade(std::string_view response, std::string_view ground_truth,
                                   std::string_view /*data_source*/, const nlohmann::json& /*extra*/) const {
  const PrimeMathVerdict verdict = prime_math_verify(response, ground_truth);
  GradeResult result;
  result.score = verdict.correct ? 1.0 : 0.0;
  result.extras["acc"] = result.score;
  return result;
}

}  // namespace rlcore::reward
