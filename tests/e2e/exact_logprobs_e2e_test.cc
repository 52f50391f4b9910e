// actor_rollout_ref.rollout.exact_logprobs (docs/exact-logprobs.md): with the
// batch-invariant forward in both engines, the rollout's log-probs equal the
// trainer's old log-probs bit for bit on every step of a GRPO run: n = 8
// samples per prompt from one shared prefill, continuous batching with joins,
// and the trainer's batch packed (use_remove_padding, the default) or padded;
// trainer.check_exact_logprobs would end the run at the first token that differs.
// The update's forward (with autograd) is exact too: with one mini-batch a
// step, PPO's ratio is exactly 1 (actor/ppo_kl 0, no clipping) while the
// weights do move.
#include "e2e_testing.h"

#include <algorithm>
#include <filesystem>

namespace fs = std::filesystem;

TEST_CASE("exact_logprobs: the rollout's log-probs equal the trainer's on every step", "[e2e][exact]") {
  const std::string ws = e2e::make_workspace("exact_logprobs", 16);
  const std::string config = e2e::write_config(ws, "exact", R"(
actor_rollout_ref:
  actor: {ppo_mini_batch_size: 8}  # the whole batch: one optimizer step a step
  rollout: {n: 8, exact_logprobs: true}
algorithm: {adv_estimator: grpo}
)");
  for (const char* padding : {"true", "false"}) {
    INFO("use_remove_padding " << padding);
    const std::string dir = ws + "/run_" + padding;
    const e2e::RunResult run = e2e::run_rlcore({"--config", config, "trainer.total_training_steps=3",
                                                "trainer.default_local_dir=" + dir, "trainer.check_exact_logprobs=true",
                                                std::string("actor_rollout_ref.model.use_remove_padding=") + padding});
    INFO(run.output);
    REQUIRE(run.status == 0);
    const auto metrics = e2e::read_metrics(dir);
    double largest_grad_norm = 0.0;
    for (int64_t step = 1; step <= 3; ++step) {
      INFO("step " << step);
      REQUIRE(metrics.count(step) == 1);
      const auto& at = metrics.at(step);
      CHECK(at.at("training/rollout_probs_diff_max") == 0.0);
      CHECK(at.at("training/rollout_probs_diff_mean") == 0.0);
      CHECK(at.at("actor/ppo_kl") == 0.0);
      CHECK(at.at("actor/pg_clipfrac") == 0.0);
      CHECK(at.at("training/rollout_logprob_mismatches") == 0.0);
      largest_grad_norm = std::max(largest_grad_norm, at.at("actor/grad_norm"));
    }
    CHECK(largest_grad_norm > 0.0);  // the ratio stayed 1 while the policy learned
  }
  fs::remove_all(ws);
}
