// The math grader and its normalisation against verl's math_reward.py: every
// expected value below is what verl's Python returns for the same input.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <string>

#include "math_grader.h"
#include "math_normalize.h"

namespace {

using rlcore::reward::MathGrader;
using rlcore::reward::strip_string;

double score(const std::string& response, const std::string& truth) {
  return MathGrader().grade(response, truth, "lighteval/MATH", nlohmann::json()).score;
}

}  // namespace

TEST_CASE("math compares the last \\boxed{} after normalisation") {
  CHECK(score("So the answer is $\\boxed{\\frac{1}{2}}$.", "0.5") == 1.0);
  CHECK(score("\\boxed{0.5}", "\\frac{1}{2}") == 1.0);
  CHECK(score("\\boxed{.5}", "\\frac12") == 1.0);
  CHECK(score("\\boxed{\\tfrac12}", "0.5") == 1.0);
  CHECK(score("\\boxed{\\dfrac{3}{4}}", "\\frac{3}{4}") == 1.0);
  CHECK(score("\\boxed{3/4}", "\\frac{3}{4}") == 1.0);
  CHECK(score("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt3}{2}") == 1.0);
  CHECK(score("\\boxed{\\left(1,2\\right)}", "(1,2)") == 1.0);
  CHECK(score("\\boxed{90^\\circ}", "90") == 1.0);
  CHECK(score("\\boxed{\\$5}", "5") == 1.0);
  CHECK(score("\\boxed{50\\%}", "50") == 1.0);
  CHECK(score("\\boxed{x = 5}", "5") == 1.0);
  CHECK(score("\\boxed{1\n0}", "10") == 1.0);
  CHECK(score("\\boxed{\\!10}", "10") == 1.0);
  CHECK(score("\\boxed{1} then \\boxed{2}", "2") == 1.0);
  CHECK(score("\\boxed{1} then \\boxed{2}", "1") == 0.0);
}

TEST_CASE("math normalisation stops where verl's does") {
  CHECK(score("\\boxed{0.50}", "0.5") == 0.0);           // only the exact "0.5" becomes 1/2
  CHECK(score("\\boxed{03/4}", "\\frac{3}{4}") == 0.0);  // int("03") round-trips to "3"
  CHECK(score("\\boxed{$5}", "5") == 0.0);               // a bare "$" is kept
  CHECK(score("\\boxed{xy = 5}", "5") == 0.0);           // left side longer than two characters
  CHECK(score("\\boxed{ab = 5}", "5") == 0.0);
  CHECK(score("\\boxed{\\frac1}", "\\frac{1}") == 0.0);
}

TEST_CASE("math units: one '\\text{ ' is cut, two make verl fall back to raw equality") {
  CHECK(score("So it is $\\boxed{10\\text{ cm}}$.", "10") == 1.0);
  CHECK(score("\\boxed{5\\text{ cm}\\text{ m}}", "5") == 0.0);
  CHECK(score("\\boxed{5\\text{ cm}\\text{ m}}", "5\\text{ cm}\\text{ m}") == 1.0);
  // fix_sqrt / fix_fracs raise on a trailing command; the raw strings are equal.
  CHECK(score("\\boxed{\\sqrt}", "\\sqrt") == 1.0);
  CHECK(score("\\boxed{\\frac}", "\\frac") == 1.0);
}

TEST_CASE("math '\\boxed ' form runs to the next '$' and wins over a later \\boxed{}") {
  CHECK(score("\\boxed 5", "5") == 1.0);
  CHECK(score("The answer is $\\boxed 5$.", "5") == 1.0);
  CHECK(score("first \\boxed 3$, final \\boxed{4}", "3") == 1.0);
  CHECK(score("first \\boxed 3$, final \\boxed{4}", "4") == 0.0);
}

TEST_CASE("math without a usable boxed answer scores 0") {
  for (const char* response : {"", "The answer is 5.", "\\boxed{5", "\\boxed{\\frac{1}{2}", "\\boxed{{5}",
                               "\\boxed\\frac{1}{2}", "\\fbox{5}"}) {
    INFO(response);
    const auto result = MathGrader().grade(response, "5", "", nlohmann::json());
    CHECK(result.score == 0.0);
    CHECK(result.extras.at("format_ok") == 0.0);
  }
  // An empty box is an answer, and it equals an empty ground truth.
  CHECK(score("\\boxed{}", "") == 1.0);
  CHECK(score("}\\boxed{5}", "5") == 1.0);
}

TEST_CASE("math counts characters, not bytes") {
  // "\xcf\x80" is pi, "\xc3\xa9" is e with acute accent: one character each.
  CHECK(score("\\boxed{\\sqrt\xcf\x80}", "\\sqrt{\xcf\x80}") == 1.0);
  CHECK(score("\\boxed{\\frac\xcf\x80"
              "2}",
              "\\frac{\xcf\x80}{2}") == 1.0);
  CHECK(score("\\boxed{\xc3\xa9 = 5}", "5") == 1.0);
  CHECK(score(std::string(1 << 20, 'a') + "\\boxed{42}", "42") == 1.0);
}

TEST_CASE("math options and extras") {
  rlcore::reward::MathOptions opts;
  CHECK(opts.score == 1.0);
  CHECK(opts.format_score == 0.0);
  opts.format_score = 0.2;
  const MathGrader grader(opts);
  const auto wrong = grader.grade("\\boxed{4}", "5", "", nlohmann::json());
  CHECK(wrong.score == 0.2);
  CHECK(wrong.extras.at("acc") == 0.0);
  CHECK(wrong.extras.at("format_ok") == 1.0);
  const auto right = grader.grade("\\boxed{5}", "5", "", nlohmann::json());
  CHECK(right.score == 1.0);
  CHECK(right.extras.at("acc") == 1.0);
}

TEST_CASE("strip_string reproduces verl's chain") {
  using Result = std::optional<std::string>;
  CHECK(strip_string("\\frac12") == Result("\\frac{1}{2}"));
  CHECK(strip_string("\\frac1{72}") == Result("\\frac{1}{72}"));
  CHECK(strip_string("\\frac{72}1") == Result("\\frac{72}1"));
  CHECK(strip_string("\\frac1{") == Result("\\frac{1}{"));
  CHECK(strip_string("\\frac1\xc3\xa9") == Result("\\frac{1}{\xc3\xa9}"));
  CHECK(strip_string("\\frac\xc3\xa9") == Result("\\frac\xc3\xa9"));
  CHECK(strip_string("\\sqrt2\\sqrt{3}") == Result("\\sqrt{2}\\sqrt{3}"));
  CHECK(strip_string(" .5") == Result("\\frac{1}{2}"));
  CHECK(strip_string("{.5}") == Result("{0.5}"));
  CHECK(strip_string(".") == Result("0."));
  CHECK(strip_string("\\rightarrow") == Result("arrow"));
  CHECK(strip_string("\\tfrac{1}{2}") == Result("\\frac{1}{2}"));
  CHECK(strip_string("k = 7") == Result("7"));
  CHECK(strip_string("x=1=2") == Result("x=1=2"));
  CHECK(strip_string("\\\\\\") == Result("\\\\"));  // replace is not rescanned
  CHECK(strip_string("10\\\\%") == Result("10"));
  CHECK(strip_string("5%") == Result("5%"));
  CHECK(strip_string("$5$") == Result("$5$"));
  CHECK(strip_string("\\text{ cm}") == Result(""));
}

TEST_CASE("strip_string a/b follows Python's int() round trip") {
  using Result = std::optional<std::string>;
  CHECK(strip_string("1/2") == Result("\\frac{1}{2}"));
  CHECK(strip_string("-1/2") == Result("\\frac{-1}{2}"));
  CHECK(strip_string("-0/2") == Result("-0/2"));
  CHECK(strip_string("1/2/3") == Result("1/2/3"));
  CHECK(strip_string("a/b") == Result("a/b"));
  // Python refuses int() of more than 4300 digits, so the slash stays.
  const std::string digits_4300(4300, '1');
  CHECK(strip_string(digits_4300 + "/2") == Result("\\frac{" + digits_4300 + "}{2}"));
  CHECK(strip_string(digits_4300 + "1/2") == Result(digits_4300 + "1/2"));
}

TEST_CASE("strip_string fails where verl raises") {
  CHECK_FALSE(strip_string("5\\text{ cm}\\text{ m}").has_value());
  CHECK_FALSE(strip_string("\\sqrt").has_value());
  CHECK_FALSE(strip_string("\\frac").has_value());
  CHECK_FALSE(strip_string("\\frac\\frac12").has_value());
}
