// The gsm8k grader against verl's gsm8k.py: every expected score below is what
// verl's compute_score returns for the same arguments.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <string>

#include "gsm8k_grader.h"

namespace {

using rlcore::reward::extract_gsm8k_answer;
using rlcore::reward::Gsm8kGrader;
using rlcore::reward::Gsm8kMethod;
using rlcore::reward::Gsm8kOptions;

// A format_score that differs from both 0 and score, so the three outcomes differ.
Gsm8kOptions options(Gsm8kMethod method = Gsm8kMethod::kStrict) {
  Gsm8kOptions opts;
  opts.method = method;
  opts.format_score = 0.1;
  return opts;
}

double score(const Gsm8kGrader& grader, const std::string& response, const std::string& truth) {
  return grader.grade(response, truth, "openai/gsm8k", nlohmann::json::object()).score;
}

std::string repeat(const std::string& piece, std::size_t times) {
  std::string out;
  for (std::size_t i = 0; i < times; ++i) out += piece;
  return out;
}

}  // namespace

TEST_CASE("gsm8k defaults are verl's") {
  const Gsm8kOptions defaults;
  CHECK(defaults.method == Gsm8kMethod::kStrict);
  CHECK(defaults.format_score == 0.0);
  CHECK(defaults.score == 1.0);
  CHECK(rlcore::reward::parse_gsm8k_method("strict") == Gsm8kMethod::kStrict);
  CHECK(rlcore::reward::parse_gsm8k_method("flexible") == Gsm8kMethod::kFlexible);
  CHECK_FALSE(rlcore::reward::parse_gsm8k_method("Strict").has_value());
}

TEST_CASE("gsm8k strict reads the last '#### <number>'") {
  const Gsm8kGrader grader(options());
  CHECK(score(grader, "Natalia sold 48/2 = 24 clips in May.\n#### 72", "72") == 1.0);
  CHECK(score(grader, "#### 1\nwait, no\n#### 2", "2") == 1.0);
  CHECK(score(grader, "#### 1\nwait, no\n#### 2", "1") == 0.1);
  CHECK(score(grader, "#### -5", "-5") == 1.0);
  // "#####" still holds "#### " one character in.
  CHECK(score(grader, "##### 5", "5") == 1.0);
  CHECK(score(grader, "The answer is \xd9\xa4\xd9\xa2 #### 42 \xf0\x9f\x98\x80", "42") == 1.0);
}

TEST_CASE("gsm8k strict cleans commas but compares the rest as a string") {
  const Gsm8kGrader grader(options());
  CHECK(score(grader, "#### 1,000", "1000") == 1.0);
  CHECK(score(grader, "#### 3,\n", "3") == 1.0);
  CHECK(score(grader, "#### 1.2.3", "1.2.3") == 1.0);
  // A sentence-ending "." is part of the number: found, but wrong.
  CHECK(score(grader, "#### 72.", "72") == 0.1);
  CHECK(score(grader, "#### 72", " 72") == 0.1);
}

TEST_CASE("gsm8k strict without a well-formed marker scores 0, not format_score") {
  const Gsm8kGrader grader(options());
  for (const char* response : {"", "The answer is 72.", "####72", "####  72", "#### - 5", "#### $1,000"}) {
    INFO(response);
    const auto result = grader.grade(response, "72", "", nlohmann::json());
    CHECK(result.score == 0.0);
    CHECK(result.extras.at("format_ok") == 0.0);
    CHECK(result.extras.at("acc") == 0.0);
  }
}

TEST_CASE("gsm8k searches only the last 300 characters, counted in code points") {
  const Gsm8kGrader grader(options());
  CHECK(score(grader, "#### 42" + repeat("x", 293), "42") == 1.0);
  CHECK(score(grader, "#### 42" + repeat("x", 294), "42") == 0.0);
  // "\xc3\xa9" is one character (e with acute accent) in two bytes.
  CHECK(score(grader, "#### 42" + repeat("\xc3\xa9", 293), "42") == 1.0);
  CHECK(score(grader, "#### 42" + repeat("\xc3\xa9", 294), "42") == 0.0);
  CHECK(score(grader, std::string(1 << 20, 'x') + "#### 42", "42") == 1.0);
  CHECK(score(grader, "#### 42" + std::string(1 << 20, 'x'), "42") == 0.0);
  // The clip may cut a number: only "345" is left of "12345".
  const Gsm8kGrader flexible(options(Gsm8kMethod::kFlexible));
  CHECK(score(flexible, "12345" + repeat("x", 297), "345") == 1.0);
}

TEST_CASE("gsm8k flexible takes the last number-like run that is not '.'") {
  const Gsm8kGrader grader(options(Gsm8kMethod::kFlexible));
  CHECK(score(grader, "#### 72", "72") == 1.0);
  CHECK(score(grader, "Answer: 7 .", "7") == 1.0);
  CHECK(score(grader, "-3 and --4", "-4") == 1.0);
  // The trailing "." sticks to the number, and flexible keeps commas.
  CHECK(score(grader, "I have 3 apples and 4 pears, so 7.", "7") == 0.1);
  CHECK(score(grader, "I have 3 apples and 4 pears, so 7.", "7.") == 1.0);
  CHECK(score(grader, "The answer is 1,000", "1000") == 0.1);
  CHECK(score(grader, "The answer is 1,000", "1,000") == 1.0);
  CHECK(score(grader, "no digits here", "7") == 0.0);
}

TEST_CASE("gsm8k flexible extraction matches verl's findall edge cases") {
  // When every match is "." verl's loop leaves "." as the answer (format_score, not 0).
  CHECK(extract_gsm8k_answer("The end.", Gsm8kMethod::kFlexible) == std::optional<std::string>("."));
  CHECK(extract_gsm8k_answer("Hello, world", Gsm8kMethod::kFlexible) == std::optional<std::string>(","));
  CHECK_FALSE(extract_gsm8k_answer("a - b", Gsm8kMethod::kFlexible).has_value());
  CHECK(extract_gsm8k_answer("#### 1,234,567", Gsm8kMethod::kStrict) == std::optional<std::string>("1234567"));
}

TEST_CASE("gsm8k reports acc and format_ok") {
  Gsm8kOptions opts = options();
  opts.score = 2.0;
  const Gsm8kGrader grader(opts);
  const auto right = grader.grade("#### 72", "72", "", nlohmann::json());
  CHECK(right.score == 2.0);
  CHECK(right.extras.at("acc") == 1.0);
  CHECK(right.extras.at("format_ok") == 1.0);
  const auto wrong = grader.grade("#### 71", "72", "", nlohmann::json());
  CHECK(wrong.score == 0.1);
  CHECK(wrong.extras.at("acc") == 0.0);
  CHECK(wrong.extras.at("format_ok") == 1.0);
}
