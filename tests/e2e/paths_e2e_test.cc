// Every advantage estimator and every KL mode through the trainer, one step
// each on one worker, each checked for a metric only its path produces.
#include "e2e_testing.h"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// A one-step, one-worker GRPO-style run of `overrides` in the workspace; its step-1 metrics.
std::map<std::string, double> one_step(const std::string& ws, const std::string& config,
                                       const std::vector<std::string>& overrides) {
  std::vector<std::string> args = {"--config", config, "trainer.total_training_steps=1",
                                   "runtime.n_workers_per_node=1"};
  args.insert(args.end(), overrides.begin(), overrides.end());
  fs::remove_all(ws + "/paths");  // each run's metrics.jsonl alone
  const e2e::RunResult run = e2e::run_rlcore(args);
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/paths");
  REQUIRE(metrics.count(1) == 1);
  return metrics.at(1);
}

const char* const kPaths = R"(
actor_rollout_ref:
  actor: {ppo_mini_batch_size: 8}
  rollout: {n: 2}
algorithm: {adv_estimator: grpo}
)";

}  // namespace

TEST_CASE("every outcome and return estimator trains a step through the trainer", "[e2e][paths]") {
  const std::string ws = e2e::make_workspace("estimators", 8);
  const std::string config = e2e::write_config(ws, "paths", kPaths);
  // gae runs in trainer_e2e_test.cc's PPO case (it needs a critic).
  for (const std::string estimator : {"grpo", "grpo_vectorized", "grpo_passk", "rloo", "rloo_vectorized", "opo", "gpg",
                                      "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax"}) {
    INFO(estimator);
    const auto step = one_step(ws, config, {"algorithm.adv_estimator=" + estimator});
    CHECK(step.count("critic/advantages/mean") == 1);
    CHECK(step.count("critic/returns/mean") == 1);
    // Only ReMax generates a greedy baseline; only the others leave it out.
    CHECK(step.count("timing_s/gen_max") == (estimator == "remax" ? 1u : 0u));
  }
  fs::remove_all(ws);
}

TEST_CASE("the optimal token baselines get sum_pi_squared from the actor; without it the config is refused",
          "[e2e][paths]") {
  const std::string ws = e2e::make_workspace("otb", 8);
  const std::string config = e2e::write_config(ws, "paths", kPaths);
  for (const std::string estimator : {"optimal_token_baseline", "tir_optimal_token_baseline"}) {
    INFO(estimator);
    const auto step = one_step(
        ws, config, {"algorithm.adv_estimator=" + estimator, "actor_rollout_ref.actor.calculate_sum_pi_squared=true"});
    CHECK(step.count("critic/advantages/mean") == 1);
    // The score-norm proxy sums 1 - 2 pi + sum pi^2 >= 0 over each response's tokens.
    REQUIRE(step.count("variance_proxy/expected_w") == 1);
    CHECK(step.at("variance_proxy/expected_w") > 0.0);
    CHECK(step.at("variance_proxy/proxy1_signal_strength") ==
          Approx(step.at("actor/grad_norm") * step.at("actor/grad_norm")));
  }
  // GRPO with the sum asked for: the proxies appear without changing the estimator.
  const auto grpo = one_step(ws, config, {"actor_rollout_ref.actor.calculate_sum_pi_squared=true"});
  CHECK(grpo.count("variance_proxy/proxy2_total_power") == 1);
  const auto plain = one_step(ws, config, {});
  CHECK(plain.count("variance_proxy/proxy2_total_power") == 0);

  const e2e::RunResult refused = e2e::run_rlcore(
      {"--config", config, "trainer.total_training_steps=1", "algorithm.adv_estimator=optimal_token_baseline"});
  CHECK(refused.status != 0);
  CHECK_THAT(refused.output, Catch::Contains("actor_rollout_ref.actor.calculate_sum_pi_squared"));
  fs::remove_all(ws);
}

TEST_CASE("the KL types as the actor's KL loss and as the in-reward penalty", "[e2e][paths]") {
  const std::string ws = e2e::make_workspace("kl", 8);
  const std::string config = e2e::write_config(ws, "paths", kPaths);
  // Each type's value and gradient is held to verl in verl_parity_test; here each family and
  // name form (verl's and the k-names, a straight-through "+") passes through the trainer once.
  for (const std::string type : {"kl", "abs", "mse", "low_var_kl", "k3+"}) {
    INFO("kl_loss_type " << type);
    const auto loss = one_step(
        ws, config, {"actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.actor.kl_loss_type=" + type});
    CHECK(loss.count("actor/kl_loss") == 1);
    CHECK(loss.count("actor/reward_kl_penalty") == 0);
  }
  for (const std::string type : {"k1", "k2", "k3"}) {
    INFO("kl_penalty " << type);
    const auto reward = one_step(ws, config, {"algorithm.use_kl_in_reward=true", "algorithm.kl_penalty=" + type});
    CHECK(reward.count("actor/reward_kl_penalty") == 1);
    CHECK(reward.at("actor/reward_kl_penalty_coeff") == Approx(0.001));  // algorithm.kl_ctrl.kl_coef
    CHECK(reward.count("actor/kl_loss") == 0);
  }
  fs::remove_all(ws);
}
