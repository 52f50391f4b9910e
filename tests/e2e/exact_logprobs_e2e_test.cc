// actor_rollout_ref.rollout.exact_logprobs (docs/exact-logprobs.md): with the
// batch-invariant forward in both engines, the rollout's log-probs equal the
// trainer's old log-probs bit for bit on every step of a GRPO run: n = 8
// samples per prompt from one shared prefill, continuous batching with joins,
// and the trainer's batch packed (use_remove_padding, the default) or padded;
// trainer.check_exact_logprobs would end the run at the first token that differs.
// The update's forward (with autograd) is exact too: with one mini-batch a
// step, PPO's ratio is exactly 1 (actor/ppo_kl 0, no clipping) while the
// weights do move. Two runs of the same config end on the same weights, bit
// for bit.
#include "e2e_testing.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace fs = std::filesystem;

namespace exact_logprobs_e2e {

std::string bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace exact_logprobs_e2e

TEST_CASE("exact_logprobs: the rollout's log-probs equal the trainer's on every step", "[e2e][exact]") {
  const std::string ws = e2e::make_workspace("exact_logprobs", 16);
  const std::string config = e2e::write_config(ws, "exact", R"(
actor_rollout_ref:
  actor: {ppo_mini_batch_size: 8}  # the whole batch: one optimizer step a step
  rollout: {n: 8, exact_logprobs: true}
algorithm: {adv_estimator: grpo}
)");
  for (const std::string name : {"packed", "padded", "packed_again"}) {
    INFO(name);
    const std::string dir = ws + "/" + name;
    const std::string packed = name == "padded" ? "false" : "true";
    const e2e::RunResult run =
        e2e::run_rlcore({"--config", config, "trainer.total_training_steps=3", "trainer.save_freq=3",
                         "trainer.default_local_dir=" + dir, "trainer.check_exact_logprobs=true",
                         "actor_rollout_ref.model.use_remove_padding=" + packed});
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
  // The same config and seed twice: the same weights and optimizer state, bit for bit.
  std::size_t compared = 0;
  const fs::path first = fs::path(ws) / "packed/checkpoints/global_step_3/actor";
  for (const auto& entry : fs::recursive_directory_iterator(first)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".safetensors") continue;
    const fs::path again =
        fs::path(ws) / "packed_again/checkpoints/global_step_3/actor" / fs::relative(entry.path(), first);
    INFO(entry.path());
    CHECK(exact_logprobs_e2e::bytes_of(entry.path()) == exact_logprobs_e2e::bytes_of(again));
    ++compared;
  }
  CHECK(compared > 0);
  fs::remove_all(ws);
}

// The asynchronous modes: a row's tokens were sampled by the pool's weights of
// some version, so each step compares the rows that the trainer's own version
// sampled whole (training/rollout_logprob_compared): one_step_off's first step
// (its batch comes from the checkpoint's weights, as does the trainer's first
// pass), and fully_async's rows started after the sync that brought the
// trainer's version. Those are equal bit for bit, across the weight transfer.
TEST_CASE("exact_logprobs in the asynchronous modes: each version's rows equal that version's trainer log-probs",
          "[e2e][exact][async]") {
  const std::string ws = e2e::make_workspace("exact_logprobs_async", 32);
  const std::string exact = R"(
actor_rollout_ref:
  actor: {ppo_mini_batch_size: 8}
  rollout: {n: 4, exact_logprobs: true}
algorithm: {adv_estimator: grpo}
rollout: {nnodes: 1, n_gpus_per_node: 1}
)";
  const std::string one_step_off =
      e2e::write_config(ws, "one_step_off", exact + "async_training: {mode: one_step_off}\n");
  const std::string fully_async = e2e::write_config(
      ws, "fully_async",
      exact +
          "async_training: {mode: fully_async, trigger_parameter_sync_step: 1, staleness_threshold: 1.0,\n"
          "                 partial_rollout: false}\n");
  for (const auto& [name, config] : {std::pair{"one_step_off", one_step_off}, std::pair{"fully_async", fully_async}}) {
    INFO(name);
    const e2e::RunResult run = e2e::run_rlcore({"--config", config, "trainer.total_training_steps=4",
                                                "trainer.check_exact_logprobs=true", "runtime.n_workers_per_node=1"});
    INFO(run.output);
    REQUIRE(run.status == 0);
    const auto metrics = e2e::read_metrics(ws + "/" + name);
    double compared = 0;
    for (int64_t step = 1; step <= 4; ++step) {
      INFO("step " << step);
      REQUIRE(metrics.count(step) == 1);
      CHECK(metrics.at(step).at("training/rollout_logprob_mismatches") == 0.0);
      compared += metrics.at(step).at("training/rollout_logprob_compared");
    }
    CHECK(compared > 0);
    if (std::string(name) == "one_step_off") CHECK(metrics.at(1).at("training/rollout_probs_diff_max") == 0.0);
  }
  fs::remove_all(ws);
}
