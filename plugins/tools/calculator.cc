// Exact arithmetic for the `calculator` tool (see calculator.h): a recursive
// descent over rationals, printed as an integer, a terminating decimal, or a
// decimal rounded to options.decimal_places.
#include "calculator.h"

#include <cctype>

#include <boost/multiprecision/cpp_int.hpp>

#include "rlcore/error.h"

namespace rlcore::tools {
namespace {

using Integer = boost::multiprecision::cpp_int;
using Rational = boost::multiprecision::cpp_rational;

class ExpressionParser {
 public:
  ExpressionParser(const std::string& text, const CalculatorOptions& options) : text_(text), options_(options) {}

  Rational parse() {
    Rational value = sum();
    skip_spaces();
    if (at_ < text_.size()) fail("unexpected '" + std::string(1, text_[at_]) + "'");
    return value;
  }

 private:
  // sum := product (('+' | '-') product)*
  Rational sum() {
    Rational value = product();
    while (true) {
      if (accept("+")) {
        value += product();
      } else if (accept("-")) {
        value -= product();
      } else {
        return check(value);
      }
    }
  }

  // product := unary (('*' | '/' | '//' | '%') unary)*
  Rational product() {
    Rational value = unary();
    while (true) {
      if (peek("**")) return value;
      if (accept("*")) {
        value *= unary();
      } else if (accept("//")) {
        value = floor_div(value, nonzero(unary(), "//"));
      } else if (accept("/")) {
        value /= nonzero(unary(), "/");
      } else if (accept("%")) {
        const Rational divisor = nonzero(unary(), "%");
        value -= floor_div(value, divisor) * divisor;
      } else {
        return check(value);
      }
      check(value);
    }
  }

  // unary := ('-' | '+') unary | power
  Rational unary() {
    if (accept("-")) return -unary();
    if (accept("+")) return unary();
    return power();
  }

  // power := atom (('**' | '^') unary)?   (right-associative, binds tighter than unary minus on its left)
  Rational power() {
    Rational base = atom();
    if (!accept("**") && !accept("^")) return base;
    const size_t where = at_;
    const Rational exponent = unary();
    if (boost::multiprecision::denominator(exponent) != 1) fail_at(where, "the exponent must be an integer");
    const Integer power = boost::multiprecision::numerator(exponent);
    if (power > 100000 || power < -100000) fail_at(where, "the exponent is too large");
    if (base == 0 && power < 0) fail_at(where, "0 to a negative power");
    Rational result = 1;
    const auto count = static_cast<int64_t>(boost::multiprecision::abs(power));
    for (int64_t i = 0; i < count; ++i) {
      result *= base;
      check(result);
    }
    return power < 0 ? Rational(1) / result : result;
  }

  // atom := number | '(' sum ')'
  Rational atom() {
    skip_spaces();
    if (accept("(")) {
      if (++depth_ > 100) fail("parentheses nested too deeply");
      Rational value = sum();
      if (!accept(")")) fail("expected ')'");
      --depth_;
      return value;
    }
    return number();
  }

  Rational number() {
    skip_spaces();
    const size_t start = at_;
    std::string digits;
    int64_t scale = 0;
    bool point = false;
    while (at_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[at_])) || text_[at_] == '.' ||
                                  text_[at_] == '_' || text_[at_] == ',')) {
      const char c = text_[at_++];
      if (c == '_' || c == ',') continue;  // 1_000 and 1,000 as Python and people write them
      if (c == '.') {
        if (point) fail_at(at_ - 1, "a second decimal point");
        point = true;
        continue;
      }
      digits += c;
      if (point) ++scale;
    }
    if (digits.empty()) {
      if (at_ >= text_.size()) fail("the expression ends where a number was expected");
      fail("expected a number, found '" + std::string(1, text_[at_]) + "'");
    }
    if (static_cast<int64_t>(digits.size()) > options_.max_result_digits)
      fail_at(start, "a number with too many digits");
    Integer denominator = 1;
    for (int64_t i = 0; i < scale; ++i) denominator *= 10;
    return Rational(Integer(digits), denominator);
  }

  Rational floor_div(const Rational& a, const Rational& b) {
    const Rational q = a / b;
    Integer n = boost::multiprecision::numerator(q);
    const Integer d = boost::multiprecision::denominator(q);
    Integer floor = n / d;  // truncates toward zero
    if (floor * d != n && n < 0) floor -= 1;
    return Rational(floor);
  }

  Rational nonzero(const Rational& value, const std::string& op) {
    if (value == 0) fail("division by zero ('" + op + "')");
    return value;
  }

  const Rational& check(const Rational& value) {
    const auto limit = static_cast<unsigned>(options_.max_result_digits) * 4;  // bits, about 1.2 per digit
    if (boost::multiprecision::msb(boost::multiprecision::abs(boost::multiprecision::numerator(value)) + 1) > limit ||
        boost::multiprecision::msb(boost::multiprecision::denominator(value)) > limit) {
      fail("the result has more than " + std::to_string(options_.max_result_digits) + " digits");
    }
    return value;
  }

  void skip_spaces() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  bool peek(const char* token) {
    skip_spaces();
    return text_.compare(at_, std::char_traits<char>::length(token), token) == 0;
  }
  bool accept(const char* token) {
    if (!peek(token)) return false;
    at_ += std::char_traits<char>::length(token);
    return true;
  }
  [[noreturn]] void fail(const std::string& message) { fail_at(at_, message); }
  [[noreturn]] void fail_at(size_t where, const std::string& message) {
    throw ValueError(message + " at character " + std::to_string(where + 1));
  }

  const std::string& text_;
  const CalculatorOptions& options_;
  size_t at_ = 0;
  int depth_ = 0;
};

// An integer, the exact decimal of a quotient that terminates, else rounded (half away from zero).
std::string format_rational(const Rational& value, int64_t decimal_places) {
  const Integer numerator = boost::multiprecision::numerator(value);
  const Integer denominator = boost::multiprecision::denominator(value);
  if (denominator == 1) return numerator.str();
  Integer rest = denominator;
  int64_t twos = 0, fives = 0;
  while (rest % 2 == 0) rest /= 2, ++twos;
  while (rest % 5 == 0) rest /= 5, ++fives;
  const int64_t places = rest == 1 ? std::max(twos, fives) : decimal_places;
  Integer scale = 1;
  for (int64_t i = 0; i < places; ++i) scale *= 10;
  const Integer magnitude = boost::multiprecision::abs(numerator) * scale;
  Integer scaled = magnitude / denominator;
  if ((magnitude % denominator) * 2 >= denominator) scaled += 1;
  std::string digits = scaled.str();
  if (static_cast<int64_t>(digits.size()) <= places)
    digits.insert(0, static_cast<size_t>(places) + 1 - digits.size(), '0');
  std::string text = digits.substr(0, digits.size() - static_cast<size_t>(places)) + "." +
                     digits.substr(digits.size() - static_cast<size_t>(places));
  if (rest != 1) {  // rounded: trailing zeros say nothing
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
  }
  return (numerator < 0 && text.find_first_not_of("0.") != std::string::npos ? "-" : "") + text;
}

}  // namespace

std::string evaluate_expression(const std::string& expression, const CalculatorOptions& options) {
  if (static_cast<int64_t>(expression.size()) > options.max_expression_chars) {
    throw ValueError("the expression is longer than " + std::to_string(options.max_expression_chars) + " characters");
  }
  if (expression.find_first_not_of(" \t\n") == std::string::npos) throw ValueError("the expression is empty");
  return format_rational(ExpressionParser(expression, options).parse(), options.decimal_places);
}

ToolSchema CalculatorTool::schema() const {
  ToolSchema schema;
  schema.name = "calculator";
  schema.description =
      "Evaluate an arithmetic expression exactly: + - * / // % ** and parentheses over integers "
      "and decimals.";
  schema.parameters = {
      {"type", "object"},
      {"properties",
       {{"expression", {{"type", "string"}, {"description", "The expression, e.g. \"(1234 * 5678) / 4\""}}}}},
      {"required", {"expression"}}};
  return schema;
}

std::chrono::milliseconds CalculatorTool::timeout() const {
  return std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_s * 1000));
}

ToolResult CalculatorTool::call(const nlohmann::json& arguments, const ToolCallContext&) const {
  const auto expression = arguments.find("expression");
  if (!arguments.is_object() || expression == arguments.end() || !expression->is_string()) {
    return {"error: calculator takes {\"expression\": \"<arithmetic>\"}", true, 0.0};
  }
  try {
    return {evaluate_expression(expression->get<std::string>(), options_), false, 0.0};
  } catch (const ValueError& error) {
    return {std::string("error: ") + error.what(), true, 0.0};
  }
}

}  // namespace rlcore::tools
