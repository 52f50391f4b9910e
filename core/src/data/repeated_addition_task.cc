// The repeated-addition task (see repeated_addition_task.h). The multiplier's
// long-tailed draw uses integer weights from sqrt (correctly rounded by IEEE
// 754), so a seed gives the same files on every platform.
#include "rlcore/core/data/repeated_addition_task.h"

#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "data/random.h"
#include "rlcore/error.h"

namespace rlcore::data {
namespace {

constexpr int64_t kRepeatedAdditionTrainStream = 0;
constexpr int64_t kRepeatedAdditionValStream = 1;
// Three-digit operands: with two, the distinct validation problems would take
// most of the common (small-k) ones away from training.
constexpr int64_t kOperandLow = 100;
constexpr int64_t kOperandCount = 900;

// Cumulative weights of k = 1..max_terms, weight(k) = floor(2^30 / k^1.5).
std::vector<uint64_t> multiplier_cumulative_weights(int max_terms) {
  std::vector<uint64_t> cumulative;
  uint64_t total = 0;
  for (int k = 1; k <= max_terms; ++k) {
    const double kd = static_cast<double>(k);
    total += static_cast<uint64_t>(static_cast<double>(uint64_t{1} << 30) / (kd * std::sqrt(kd)));
    cumulative.push_back(total);
  }
  return cumulative;
}

RepeatedAdditionProblem draw(std::mt19937_64& engine, const std::vector<uint64_t>& cumulative) {
  RepeatedAdditionProblem problem;
  problem.a = kOperandLow + static_cast<int64_t>(data::random::uniform_below(engine, kOperandCount));
  const uint64_t u = data::random::uniform_below(engine, cumulative.back());
  int64_t k = 1;
  while (u >= cumulative[static_cast<size_t>(k - 1)]) ++k;
  problem.k = k;
  return problem;
}

nlohmann::json rl_record(const RepeatedAdditionProblem& problem, const char* split, int64_t index) {
  return {{"data_source", kArithmeticDataSource},
          {"prompt", nlohmann::json::array({{{"role", "user"}, {"content", problem.prompt()}}})},
          {"ability", "math"},
          {"reward_model", {{"style", "rule"}, {"ground_truth", std::to_string(problem.answer())}}},
          {"extra_info", {{"split", split}, {"index", index}, {"a", problem.a}, {"k", problem.k}}}};
}

void check_options(const RepeatedAdditionTaskOptions& options) {
  if (options.max_terms < 1 || options.max_terms > 64) {
    throw ValueError("repeated-addition task: max_terms must be 1 to 64, got " + std::to_string(options.max_terms));
  }
  if (options.train < 0 || options.val < 0) throw ValueError("repeated-addition task: record counts must be >= 0");
  const int64_t problems = kOperandCount * options.max_terms;
  if (options.val * 2 > problems) {
    throw ValueError("repeated-addition task: " + std::to_string(options.val) +
                     " validation problems is more than half of the " + std::to_string(problems) +
                     " possible with max_terms " + std::to_string(options.max_terms) +
                     "; ask for fewer or raise max_terms");
  }
}

}  // namespace

std::string RepeatedAdditionProblem::prompt() const { return std::to_string(a) + "*" + std::to_string(k) + "="; }

std::string RepeatedAdditionProblem::response() const {
  std::string text;
  for (int64_t i = 1; i <= k; ++i) {
    if (i > 1) text += ',';
    text += std::to_string(a * i);
  }
  return text + " #### " + std::to_string(answer());
}

ArithmeticTaskData make_repeated_addition_task(const RepeatedAdditionTaskOptions& options) {
  check_options(options);
  const std::vector<uint64_t> cumulative = multiplier_cumulative_weights(options.max_terms);
  ArithmeticTaskData data;
  std::set<std::pair<int64_t, int64_t>> val_keys;
  std::mt19937_64 val_engine = data::random::make_engine(options.seed, kRepeatedAdditionValStream);
  // Distinct validation problems from the same long-tailed draw; the rare large
  // multipliers make the last few slow to find, so a cap guards the loop.
  for (int64_t attempts = 0; static_cast<int64_t>(data.val.size()) < options.val; ++attempts) {
    if (attempts > 1000 * (options.val + 1)) {
      throw ValueError("repeated-addition task: cannot draw " + std::to_string(options.val) +
                       " distinct validation problems; ask for fewer or raise max_terms");
    }
    const RepeatedAdditionProblem problem = draw(val_engine, cumulative);
    if (!val_keys.insert({problem.a, problem.k}).second) continue;
    data.val.push_back(rl_record(problem, "val", static_cast<int64_t>(data.val.size())));
  }
  std::mt19937_64 train_engine = data::random::make_engine(options.seed, kRepeatedAdditionTrainStream);
  while (static_cast<int64_t>(data.train.size()) < options.train) {
    const RepeatedAdditionProblem problem = draw(train_engine, cumulative);
    if (val_keys.count({problem.a, problem.k})) continue;
    data.train.push_back(rl_record(problem, "train", static_cast<int64_t>(data.train.size())));
    nlohmann::json sft = data.train.back();
    sft["response"] = problem.response();
    data.sft.push_back(std::move(sft));
  }
  return data;
}

}  // namespace rlcore::data
