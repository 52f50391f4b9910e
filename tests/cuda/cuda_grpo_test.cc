// GRPO end to end on the GPU: the rlcore binary, one worker bound to cuda:0
// (actor, rollout and hybrid swaps on the device), the same learnable reward
// and the same bar as the CPU run in tests/e2e/trainer_e2e_test.cc.
#include "../e2e/e2e_testing.h"
#include "cuda_testing.h"

#include <filesystem>

TEST_CASE("GRPO on the GPU raises the learnable reward like the CPU run", "[cuda]") {
  cuda_test::require_gpu();
  const std::string ws = e2e::make_workspace("grpo_cuda");
  const std::string config = e2e::write_config(ws, "grpo", e2e::kLearningGrpo);
  const e2e::RunResult run = e2e::run_rlcore(
      {"--config", config, "trainer.device=cuda", "trainer.n_gpus_per_node=1", "trainer.total_training_steps=12"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/grpo");
  REQUIRE(metrics.size() == 12);
  // Device memory from the caching allocator: the weights live there.
  CHECK(metrics.at(1).at("memory/allocated_bytes") > 0);
  CHECK(metrics.at(1).at("memory/peak_swap_bytes") > 0);
  // The rollout's token probabilities are the trainer's (both on the GPU).
  CHECK(metrics.at(12).at("training/rollout_probs_diff_max") < 1e-3);
  const double first = e2e::mean_over_steps(metrics, "critic/score/mean", 1, 3);
  const double last = e2e::mean_over_steps(metrics, "critic/score/mean", 10, 12);
  CHECK(last > first + 0.1);
  std::filesystem::remove_all(ws);
}
