// The arithmetic grader: "#### <integer>" answers compared as integers.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <string>

#include "arithmetic_grader.h"

namespace {

using rlcore::reward::ArithmeticGrader;
using rlcore::reward::ArithmeticOptions;
using rlcore::reward::canonical_integer;

rlcore::GradeResult grade(const std::string& response, const std::string& truth) {
  ArithmeticOptions opts;
  opts.format_score = 0.1;
  return ArithmeticGrader(opts).grade(response, truth, "rlcore/arithmetic", nlohmann::json());
}

}  // namespace

TEST_CASE("arithmetic accepts equal integers in any spelling the gsm8k rule reads") {
  CHECK(grade("12+345 = 357\n#### 357", "357").score == 1.0);
  CHECK(grade("#### 0357", "357").score == 1.0);
  CHECK(grade("#### 1,234", "1234").score == 1.0);
  CHECK(grade("#### -0", "0").score == 1.0);
  CHECK(grade("#### -42", "-42").score == 1.0);
  CHECK(grade("#### 1\n#### 357", "357").score == 1.0);
  CHECK(grade("#### 357", " 357\n").score == 1.0);
  const std::string big = "123456789012345678901234567890123456789";
  CHECK(grade("#### " + big, big).score == 1.0);
  CHECK(grade("#### " + big, big.substr(0, big.size() - 1) + "8").score == 0.1);
}

TEST_CASE("arithmetic: a found but wrong or non-integer answer earns format_score") {
  for (const char* response : {"#### 358", "#### 357.", "#### 357.0", "#### 3.5.7", "#### ,"}) {
    INFO(response);
    const auto result = grade(response, "357");
    CHECK(result.score == 0.1);
    CHECK(result.extras.at("acc") == 0.0);
    CHECK(result.extras.at("format_ok") == 1.0);
  }
}

TEST_CASE("arithmetic: no '#### ' answer scores 0") {
  for (const char* response : {"", "357", "#### +357", "####357",
                               "#### \xe2\x88\x92"
                               "5"}) {
    INFO(response);
    const auto result = grade(response, "357");
    CHECK(result.score == 0.0);
    CHECK(result.extras.at("format_ok") == 0.0);
  }
}

TEST_CASE("arithmetic: a ground truth that is not an integer matches nothing") {
  const auto result = grade("#### 5", "five");
  CHECK(result.score == 0.1);
  CHECK(result.extras.at("acc") == 0.0);
}

TEST_CASE("canonical_integer") {
  using Result = std::optional<std::string>;
  CHECK(canonical_integer("007") == Result("7"));
  CHECK(canonical_integer("000") == Result("0"));
  CHECK(canonical_integer("-000") == Result("0"));
  CHECK(canonical_integer("-012") == Result("-12"));
  CHECK_FALSE(canonical_integer("").has_value());
  CHECK_FALSE(canonical_integer("-").has_value());
  CHECK_FALSE(canonical_integer("+1").has_value());
  CHECK_FALSE(canonical_integer("1.0").has_value());
}
