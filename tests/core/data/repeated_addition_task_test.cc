// The repeated-addition task: worked responses the arithmetic grader accepts,
// ground truths checked independently, disjoint splits, and response lengths
// that are long-tailed (the point of the task: docs/async.md#benchmark).
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "arithmetic_grader.h"
#include "rlcore/core/data/repeated_addition_task.h"
#include "rlcore/error.h"

using rlcore::data::make_repeated_addition_task;
using rlcore::data::RepeatedAdditionTaskOptions;

namespace repeated_addition_test {

RepeatedAdditionTaskOptions small_task(int64_t seed) {
  RepeatedAdditionTaskOptions options;
  options.train = 5000;
  options.val = 200;
  options.seed = seed;
  return options;
}

std::string repeated_prompt(const nlohmann::json& record) { return record["prompt"][0]["content"]; }

// "137*4=" -> {137, 4}, parsed here rather than taken from the generator.
std::pair<int64_t, int64_t> operands(const std::string& prompt) {
  const size_t star = prompt.find('*');
  return {std::stoll(prompt.substr(0, star)), std::stoll(prompt.substr(star + 1, prompt.size() - star - 2))};
}

}  // namespace repeated_addition_test

using namespace repeated_addition_test;

TEST_CASE("repeated addition: each response is the running sums, graded right", "[arithmetic]") {
  const auto data = make_repeated_addition_task(small_task(1));
  REQUIRE(data.sft.size() == data.train.size());
  const rlcore::reward::ArithmeticGrader grader;
  for (size_t i = 0; i < data.train.size(); ++i) {
    const auto [a, k] = operands(repeated_prompt(data.train[i]));
    CHECK(a >= 100);
    CHECK(a <= 999);
    const std::string truth = data.train[i]["reward_model"]["ground_truth"];
    CHECK(truth == std::to_string(a * k));
    const std::string response = data.sft[i]["response"];
    std::istringstream terms(response.substr(0, response.find(' ')));
    int64_t n = 0;
    for (std::string term; std::getline(terms, term, ',');) CHECK(std::stoll(term) == a * ++n);
    CHECK(n == k);
    CHECK(grader.grade(response, truth, rlcore::data::kArithmeticDataSource, nlohmann::json()).score == 1.0);
  }
}

TEST_CASE("repeated addition: response lengths are long-tailed, the splits disjoint and seeded", "[arithmetic]") {
  const auto data = make_repeated_addition_task(small_task(2));
  std::map<int64_t, int64_t> multipliers;
  size_t total_length = 0;
  size_t longest = 0;
  for (const auto& record : data.sft) {
    ++multipliers[record["extra_info"]["k"].get<int64_t>()];
    const size_t length = record["response"].get<std::string>().size();
    total_length += length;
    longest = std::max(longest, length);
  }
  // P(k) ~ k^-1.5 on 1..16: k = 1 about 44% of draws, k = 16 about 0.7%.
  CHECK(multipliers.begin()->first == 1);
  CHECK(multipliers.rbegin()->first == 16);
  CHECK(multipliers[1] > 1800);
  CHECK(multipliers[1] < 2600);
  CHECK(multipliers[2] > multipliers[4]);
  CHECK(multipliers[4] > multipliers[16]);
  const double mean_length = static_cast<double>(total_length) / static_cast<double>(data.sft.size());
  CHECK(mean_length * 3 < static_cast<double>(longest));

  std::set<std::string> val;
  for (const auto& record : data.val) val.insert(repeated_prompt(record));
  CHECK(val.size() == data.val.size());
  for (const auto& record : data.train) CHECK_FALSE(val.count(repeated_prompt(record)));

  CHECK(make_repeated_addition_task(small_task(2)).train == data.train);
  CHECK(make_repeated_addition_task(small_task(3)).train != data.train);
}

TEST_CASE("repeated addition: bad options are errors", "[arithmetic]") {
  RepeatedAdditionTaskOptions options = small_task(1);
  options.max_terms = 0;
  CHECK_THROWS_WITH(make_repeated_addition_task(options), Catch::Contains("max_terms must be 1 to 64"));
  options = small_task(1);
  options.max_terms = 1;
  options.val = 451;  // of 900 problems
  CHECK_THROWS_WITH(make_repeated_addition_task(options), Catch::Contains("more than half"));
}
