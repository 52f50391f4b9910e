// GRPO through `rlcore train` with the train-megatron actor: the trainer gives
// the pool the mesh {dp, pp, tp}, splits rows over dp only, and swaps Megatron
// weights into the native rollout through the megatron adaptor. The first
// step's numbers (same weights, same samples) match the fsdp actor's, and the
// rollout's token probabilities match the trainer's at every step.
#include "e2e_testing.h"

#include <cmath>
#include <filesystem>

namespace {

const char* kGrpoTemplate = R"(
actor_rollout_ref:
  actor: {ppo_mini_batch_size: 8, ppo_micro_batch_size_per_gpu: 4%s}
  rollout: {n: 4%s}
algorithm: {adv_estimator: grpo}
)";

std::string grpo_config(const std::string& actor, const std::string& rollout) {
  std::string yaml = kGrpoTemplate;
  yaml.replace(yaml.find("%s"), 2, actor);
  yaml.replace(yaml.find("%s"), 2, rollout);
  return yaml;
}

std::map<int64_t, std::map<std::string, double>> run_grpo(const std::string& workspace, const std::string& name,
                                                          const std::string& yaml) {
  const std::string config = e2e::write_config(workspace, name, yaml);
  const e2e::RunResult run =
      e2e::run_rlcore({"--config", config, "runtime.n_workers_per_node=4", "trainer.total_training_steps=2"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  return e2e::read_metrics(workspace + "/" + name);
}

}  // namespace

TEST_CASE("GRPO with train-megatron tp=2 pp=2 matches the fsdp actor on step 1, rollout probabilities match") {
  const std::string workspace = e2e::make_workspace("grpo_megatron", 16);
  const auto fsdp = run_grpo(workspace, "fsdp", grpo_config("", ""));
  const auto megatron = run_grpo(
      workspace, "megatron",
      grpo_config(", strategy: megatron, megatron: {tensor_model_parallel_size: 2, pipeline_model_parallel_size: 2}",
                  ""));
  REQUIRE(megatron.size() == 2);
  for (const char* key : {"critic/score/mean", "actor/pg_loss", "actor/grad_norm", "actor/entropy"}) {
    INFO(key);
    REQUIRE(fsdp.at(1).count(key) == 1);
    REQUIRE(megatron.at(1).count(key) == 1);
    const double a = fsdp.at(1).at(key), b = megatron.at(1).at(key);
    CHECK(std::abs(a - b) <= 1e-4 * std::max(1.0, std::abs(a)));
  }
  for (const auto& [step, values] : megatron) {
    INFO("step " << step);
    CHECK(values.at("training/rollout_probs_diff_max") < 1e-4);
    CHECK(values.at("memory/peak_swap_bytes") > 0);
  }
  // The rollout sharing the trainer's TP groups (rollout tp = trainer tp = 2).
  const auto shared_tp = run_grpo(workspace, "megatron_rollout_tp",
                                  grpo_config(", strategy: megatron, megatron: {tensor_model_parallel_size: 2}",
                                              ", tensor_model_parallel_size: 2"));
  REQUIRE(shared_tp.size() == 2);
  for (const auto& [step, values] : shared_tp) {
    INFO("rollout tp 2, step " << step);
    CHECK(values.at("training/rollout_probs_diff_max") < 1e-4);
  }
  std::filesystem::remove_all(workspace);
}
