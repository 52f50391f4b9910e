// The built-in advantage estimators and policy losses held to verl's own
// functions: the inputs and expected outputs come from verl's core_algos.py
// run by reference/verl_estimators.py (float32, interleaved groups of 1 to 4
// responses, ties, length-1 and full-length responses) and
// reference/verl_losses.py (ratios inside and outside the clip bounds, every
// loss_agg_mode, with and without rollout-correction weights: loss, gradient
// and metrics), for everything both have.
#include "../../common/algorithms_testing.h"

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "../../common/reference_python.h"
#include "rlcore/advantage_estimator.h"
#include "rlcore/config_node.h"
#include "rlcore/policy_loss.h"
#include "rlcore/core/algorithms/builtin_algorithms.h"
#include "rlcore/registry.h"
#include "rlcore/rl_functional.h"

using nlohmann::json;

namespace {

at::Tensor float_tensor(const json& rows) {
  rlcore_test::Matrix matrix;
  for (const auto& row : rows) matrix.push_back(row.get<rlcore_test::Row>());
  return rlcore_test::tensor(matrix, at::kFloat);
}

at::Tensor float_vector(const json& row) { return rlcore_test::tensor(row.get<rlcore_test::Row>(), at::kFloat); }

void check_matches(const at::Tensor& actual, const json& expected) {
  const rlcore_test::Matrix got = rlcore_test::matrix(actual);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    REQUIRE(got[i].size() == expected[i].size());
    for (size_t j = 0; j < got[i].size(); ++j) {
      const double want = expected[i][j].get<double>();
      INFO("row " << i << ", token " << j);
      CHECK(got[i][j] == Approx(want).margin(2e-6).epsilon(2e-6));
    }
  }
}

}  // namespace

TEST_CASE("every advantage estimator verl and rlcore share gives verl's values", "[algorithms][verl]") {
  const json reference = json::parse(
      rlcore_test::run_reference(rlcore_test::reference_script("core/algorithms/reference/verl_estimators.py")));
  rlcore::Registry registry;
  rlcore::algorithms::register_builtin_algorithms(registry);
  std::set<std::string> covered;
  for (const json& c : reference["cases"]) {
    const std::string name = c["name"];
    INFO("verl " << reference["verl"].get<std::string>() << ": " << name << " " << c["options"].dump());
    const auto estimator = registry.create<rlcore::AdvantageEstimator>(
        name, c["options"].empty() ? rlcore::ConfigNode() : rlcore::ConfigNode::parse(c["options"].dump(), name));
    rlcore::AdvantageInput input;
    input.token_level_rewards = float_tensor(c["token_level_rewards"]);
    input.response_mask = float_tensor(c["response_mask"]);
    input.index = at::tensor(c["index"].get<std::vector<int64_t>>(), at::kLong);
    if (c.contains("values")) input.values = float_tensor(c["values"]);
    if (c.contains("old_log_probs")) input.old_log_probs = float_tensor(c["old_log_probs"]);
    if (c.contains("sum_pi_squared")) input.sum_pi_squared = float_tensor(c["sum_pi_squared"]);
    if (c.contains("rollout_is_weights")) input.rollout_is_weights = float_tensor(c["rollout_is_weights"]);
    if (c.contains("reward_baselines")) input.reward_baselines = float_vector(c["reward_baselines"]);
    if (c.contains("reward_components")) {
      for (const auto& [key, values] : c["reward_components"].items())
        input.reward_components[key] = float_vector(values);
    }
    const rlcore::AdvantageOutput output = estimator->compute(input);
    check_matches(output.advantages, c["advantages"]);
    check_matches(output.returns, c["returns"]);
    covered.insert(name);
  }
  CHECK(covered == std::set<std::string>{"gae", "grpo", "grpo_vectorized", "grpo_passk", "gdpo", "rloo",
                                         "rloo_vectorized", "opo", "gpg", "reinforce_plus_plus",
                                         "reinforce_plus_plus_baseline", "remax", "optimal_token_baseline",
                                         "tir_optimal_token_baseline"});
}

TEST_CASE("every policy loss verl and rlcore share gives verl's loss, gradient and metrics", "[algorithms][verl]") {
  const json reference = json::parse(
      rlcore_test::run_reference(rlcore_test::reference_script("core/algorithms/reference/verl_losses.py")));
  rlcore::Registry registry;
  rlcore::algorithms::register_builtin_algorithms(registry);
  std::set<std::string> covered;
  for (const json& c : reference["cases"]) {
    const std::string name = c["name"];
    const bool weighted = c.contains("rollout_is_weights");
    INFO("verl " << reference["verl"].get<std::string>() << ": " << name << " " << c["clip"].dump() << " "
                 << c["loss_agg_mode"].get<std::string>() << (weighted ? " with rollout_is_weights" : ""));
    const json& options = c["options"];
    const auto loss = registry.create<rlcore::PolicyLoss>(
        name, options.contains("dro_beta")
                  ? rlcore::ConfigNode::parse("dro_beta: " + options["dro_beta"].dump(), "verl_losses.py")
                  : rlcore::ConfigNode());
    rlcore::PolicyLossInput input;
    input.old_log_prob = float_tensor(c["old_log_prob"]);
    input.log_prob = float_tensor(c["log_prob"]).requires_grad_(true);
    input.advantages = float_tensor(c["advantages"]);
    input.response_mask = float_tensor(c["response_mask"]);
    if (weighted) input.rollout_is_weights = float_tensor(c["rollout_is_weights"]);
    rlcore::PolicyLossConfig config;
    config.clip_ratio = c["clip"]["clip_ratio"];
    config.clip_ratio_low = c["clip"]["clip_ratio_low"].get<double>();
    config.clip_ratio_high = c["clip"]["clip_ratio_high"].get<double>();
    config.clip_ratio_c = c["clip"]["clip_ratio_c"];
    config.tau_pos = options.value("tau_pos", config.tau_pos);
    config.tau_neg = options.value("tau_neg", config.tau_neg);
    config.aggregation.mode = c["loss_agg_mode"];
    const rlcore::PolicyLossOutput output = loss->compute(input, config);
    CHECK(output.loss.item<double>() == Approx(c["loss"].get<double>()).margin(2e-6).epsilon(2e-6));
    output.loss.backward();
    check_matches(input.log_prob.grad(), c["grad"]);
    for (const auto& [metric, value] : output.metrics) {
      INFO(metric);
      REQUIRE(c["metrics"].contains(metric));
      CHECK(value.item<double>() == Approx(c["metrics"][metric].get<double>()).margin(2e-6).epsilon(2e-6));
    }
    covered.insert(name);
  }
  CHECK(covered ==
        std::set<std::string>{"vanilla", "gspo", "cispo", "gpg", "geo_mean", "dppo_tv", "dppo_kl", "sapo", "dro"});

  // Every KL type rlcore accepts, value and gradient.
  std::map<std::string, json> kl_cases;
  for (const json& c : reference["kl"]) kl_cases[c["type"]] = c;
  for (const std::string& type : rlcore::kl_penalty_types()) {
    INFO("kl_penalty " << type);
    REQUIRE(kl_cases.count(type) == 1);
    const json& c = kl_cases[type];
    const at::Tensor log_prob = float_tensor(c["log_prob"]).requires_grad_(true);
    const at::Tensor value = rlcore::kl_penalty(log_prob, float_tensor(c["ref_log_prob"]), type);
    check_matches(value, c["value"]);
    value.sum().backward();
    check_matches(log_prob.grad(), c["grad"]);
  }
}
