// verl's math_reward.py normalisation, one function per Python helper and in the
// same order, so a diff against the Python reads line by line.
#include "math_normalize.h"

#include <cstddef>
#include <utility>
#include <vector>

#include "python_str.h"

namespace rlcore::reward {
namespace {

// Python's int() refuses strings of more than this many digits
// (sys.get_int_max_str_digits(), Python >= 3.10.7), and fix_a_slash_b then keeps "a/b".
constexpr std::size_t kPythonIntMaxStrDigits = 4300;

// True when str(int(text)) == text, i.e. fix_a_slash_b's assert would pass.
bool is_canonical_python_int(std::string_view text) {
  const std::string_view digits = starts_with(text, "-") ? text.substr(1) : text;
  if (digits.empty() || digits.size() > kPythonIntMaxStrDigits) return false;
  for (const char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  if (digits[0] == '0') return text == "0";  // no leading zeros, no "-0"
  return true;
}

std::optional<std::string> remove_right_units(std::string text) {
  // "\text{ " only ever occurs (in MATH's val set) when describing units.
  if (!contains(text, "\\text{ ")) return text;
  const std::vector<std::string_view> pieces = split(text, "\\text{ ");
  if (pieces.size() != 2) return std::nullopt;
  return std::string(pieces[0]);
}

std::optional<std::string> fix_sqrt(std::string text) {
  if (!contains(text, "\\sqrt")) return text;
  const std::vector<std::string_view> pieces = split(text, "\\sqrt");
  std::string out(pieces[0]);
  for (std::size_t i = 1; i < pieces.size(); ++i) {
    const std::string_view piece = pieces[i];
    if (piece.empty()) return std::nullopt;  // split[0] raises IndexError
    if (piece[0] == '{') {
      out.append("\\sqrt").append(piece);
      continue;
    }
    const std::size_t first = utf8_char_size(piece, 0);
    out.append("\\sqrt{").append(piece.substr(0, first)).append("}").append(piece.substr(first));
  }
  return out;
}

std::optional<std::string> fix_fracs(std::string text) {
  const std::vector<std::string_view> pieces = split(text, "\\frac");
  std::string out(pieces[0]);
  for (std::size_t i = 1; i < pieces.size(); ++i) {
    const std::string_view piece = pieces[i];
    out.append("\\frac");
    if (piece.empty()) return std::nullopt;  // substr[0] raises IndexError
    if (piece[0] == '{') {
      out.append(piece);
      continue;
    }
    const std::size_t a_size = utf8_char_size(piece, 0);
    if (a_size == piece.size()) return text;  // one character: verl gives up, unchanged
    const std::string_view a = piece.substr(0, a_size);
    const std::string_view b = piece.substr(a_size, utf8_char_size(piece, a_size));
    const std::string_view post = piece.substr(a_size + b.size());
    out.append("{").append(a).append("}");
    if (b != "{") {
      out.append("{").append(b).append("}");
    } else {
      out.append(b);
    }
    out.append(post);
  }
  return out;
}

std::string fix_a_slash_b(std::string text) {
  const std::vector<std::string_view> pieces = split(text, "/");
  if (pieces.size() != 2) return text;
  if (!is_canonical_python_int(pieces[0]) || !is_canonical_python_int(pieces[1])) return text;
  std::string out = "\\frac{";
  out.append(pieces[0]).append("}{").append(pieces[1]).append("}");
  return out;
}

}  // namespace

std::optional<std::string> last_boxed_only_string(std::string_view text) {
  constexpr std::string_view kBoxedSpace = "\\boxed ";
  // The "\boxed " form wins even over a later "\boxed{...}".
  if (const std::size_t hit = text.rfind(kBoxedSpace); hit != std::string_view::npos) {
    const std::string_view rest = text.substr(hit + kBoxedSpace.size());
    return std::string(kBoxedSpace).append(rest.substr(0, rest.find('$')));
  }
  std::size_t start = text.rfind("\\boxed");
  if (start == std::string_view::npos) start = text.rfind("\\fbox");
  if (start == std::string_view::npos) return std::nullopt;

  // Only a "}" can close: a stray "}" first drives the count negative for good.
  std::ptrdiff_t open = 0;
  for (std::size_t i = start; i < text.size(); ++i) {
    if (text[i] == '{') ++open;
    if (text[i] == '}' && --open == 0) return std::string(text.substr(start, i - start + 1));
  }
  return std::nullopt;
}

std::optional<std::string> remove_boxed(std::string_view boxed) {
  constexpr std::string_view kBoxedSpace = "\\boxed ";
  constexpr std::string_view kBoxedBrace = "\\boxed{";
  if (contains(boxed, kBoxedSpace)) {
    if (!starts_with(boxed, kBoxedSpace)) return std::nullopt;
    return std::string(boxed.substr(kBoxedSpace.size()));
  }
  if (!starts_with(boxed, kBoxedBrace) || boxed.back() != '}') return std::nullopt;
  return std::string(boxed.substr(kBoxedBrace.size(), boxed.size() - kBoxedBrace.size() - 1));
}

std::optional<std::string> strip_string(std::string_view text) {
  std::string s = replace_all(text, "\n", "");
  s = replace_all(s, "\\!", "");
  s = replace_all(s, "\\\\", "\\");
  s = replace_all(s, "tfrac", "frac");
  s = replace_all(s, "dfrac", "frac");
  s = replace_all(s, "\\left", "");
  s = replace_all(s, "\\right", "");
  s = replace_all(s, "^{\\circ}", "");
  s = replace_all(s, "^\\circ", "");
  // Only "\$": a bare "$" stays.
  s = replace_all(s, "\\$", "");

  std::optional<std::string> no_units = remove_right_units(std::move(s));
  if (!no_units) return std::nullopt;
  s = std::move(*no_units);

  s = replace_all(s, "\\\\%", "");
  s = replace_all(s, "\\%", "");
  s = replace_all(s, " .", " 0.");
  s = replace_all(s, "{.", "{0.");
  if (s.empty()) return s;
  if (s[0] == '.') s.insert(0, "0");

  // "k = 5" -> " 5": a left side of at most two characters, spaces included.
  if (const std::vector<std::string_view> sides = split(s, "="); sides.size() == 2 && utf8_length(sides[0]) <= 2) {
    s = std::string(sides[1]);
  }

  std::optional<std::string> sqrt_fixed = fix_sqrt(std::move(s));
  if (!sqrt_fixed) return std::nullopt;
  s = replace_all(*sqrt_fixed, " ", "");

  std::optional<std::string> fracs_fixed = fix_fracs(std::move(s));
  if (!fracs_fixed) return std::nullopt;
  s = std::move(*fracs_fixed);

  // Only the exact string "0.5": "0.50" or "1.5" stay as they are.
  if (s == "0.5") s = "\\frac{1}{2}";
  return fix_a_slash_b(std::move(s));
}

bool is_equiv(std::string_view answer, std::string_view ground_truth) {
  const std::optional<std::string> stripped_answer = strip_string(answer);
  const std::optional<std::string> stripped_truth = strip_string(ground_truth);
  if (!stripped_answer || !stripped_truth) return answer == ground_truth;
  return *stripped_answer == *stripped_truth;
}

}  // namespace rlcore::reward
