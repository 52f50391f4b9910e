// GRPO on a mixture of experts (a tiny random Qwen3-MoE, and a DeepSeek-V3, from
// `rlcore model init`): the fsdp actor and the native rollout run it, swap its
// experts' weights, agree on log-probs, and learn the lowercase reward; routing
// replay (R2, R3) and the router losses; DeepSeek-V3 on the megatron actor;
// what cannot run one says so by name.
#include "e2e_testing.h"

#include <filesystem>

#include <catch2/catch.hpp>

namespace fs = std::filesystem;

namespace moe_e2e {

// The e2e workspace with its model replaced by a tiny `arch` mixture of experts (8 experts, 2 per token).
std::string moe_workspace(const std::string& name, const std::string& arch = "qwen3_moe") {
  const std::string ws = e2e::make_workspace(name);
  const e2e::RunResult init = e2e::run_rlcore(
      {"model", "init", "--arch", arch, "--size", "tiny", "--seed", "3", "--out", ws + "/model", "--force"});
  INFO(init.output);
  REQUIRE(init.status == 0);
  return ws;
}

}  // namespace moe_e2e

TEST_CASE("GRPO trains a mixture of experts: fsdp actor, native rollout, same log-probs, the reward rises") {
  const std::string ws = moe_e2e::moe_workspace("moe");
  const std::string config = e2e::write_config(ws, "moe", e2e::kLearningGrpo);
  const e2e::RunResult run = e2e::run_rlcore({"--config", config, "trainer.total_training_steps=12"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/moe");
  REQUIRE(metrics.size() == 12);
  for (const auto& [step, m] : metrics) {
    INFO("step " << step);
    CHECK(m.at("training/rollout_probs_diff_max") < 1e-4);  // the same experts chosen on both sides, fp32
    CHECK(m.at("perf/swap_bytes") > 0);
  }
  CHECK(e2e::mean_over_steps(metrics, "critic/score/mean", 10, 12) >
        e2e::mean_over_steps(metrics, "critic/score/mean", 1, 3) + 0.1);
  fs::remove_all(ws);
}

TEST_CASE(
    "GRPO trains a DeepSeek-V3 (latent attention, grouped routing): fsdp actor, native rollout, the reward rises") {
  const std::string ws = moe_e2e::moe_workspace("deepseek_v3", "deepseek_v3");
  const std::string config = e2e::write_config(ws, "deepseek_v3", e2e::kLearningGrpo);
  const e2e::RunResult run = e2e::run_rlcore({"--config", config, "trainer.total_training_steps=12"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/deepseek_v3");
  REQUIRE(metrics.size() == 12);
  for (const auto& [step, m] : metrics) {
    INFO("step " << step);
    CHECK(m.at("training/rollout_probs_diff_max") < 1e-4);
    CHECK(m.at("perf/swap_bytes") > 0);
  }
  CHECK(e2e::mean_over_steps(metrics, "critic/score/mean", 10, 12) >
        e2e::mean_over_steps(metrics, "critic/score/mean", 1, 3) + 0.1);
  fs::remove_all(ws);
}

TEST_CASE("GRPO runs DeepSeek-V3 on the megatron actor: its log-probs equal the native rollout's") {
  const std::string ws = moe_e2e::moe_workspace("deepseek_v3_megatron", "deepseek_v3");
  const std::string megatron = e2e::write_config(ws, "megatron", R"(
actor_rollout_ref:
  actor: {strategy: megatron, ppo_mini_batch_size: 8}
  rollout: {n: 2}
algorithm: {adv_estimator: grpo}
)");
  const e2e::RunResult run = e2e::run_rlcore({"--config", megatron, "trainer.total_training_steps=2"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/megatron");
  REQUIRE(metrics.size() == 2);
  for (const auto& [step, m] : metrics) {
    INFO("step " << step);
    CHECK(m.at("training/rollout_probs_diff_max") < 1e-4);  // fp32: the same experts on both sides
    CHECK(m.at("perf/swap_bytes") > 0);
  }
  fs::remove_all(ws);
}

TEST_CASE("LoRA on a mixture of experts is refused by name") {
  const std::string ws = moe_e2e::moe_workspace("moe_refused");
  const std::string lora = e2e::write_config(ws, "lora", e2e::kQuickGrpo);
  const e2e::RunResult with_lora =
      e2e::run_rlcore({"--config", lora, "actor_rollout_ref.model.lora_rank=4", "trainer.total_training_steps=1"});
  CHECK(with_lora.status != 0);
  CHECK_THAT(with_lora.output, Catch::Contains("lora") && Catch::Contains("mixture of experts"));
  fs::remove_all(ws);
}

TEST_CASE("routing replay: R3 trains on the rollout's routing exactly; without it the bf16 trainer routes apart") {
  const std::string ws = moe_e2e::moe_workspace("moe_replay");
  const std::string config = e2e::write_config(ws, "replay", e2e::kQuickGrpo);
  std::map<std::string, std::map<int64_t, std::map<std::string, double>>> runs;
  for (const std::string mode : {"disabled", "R3", "R2"}) {
    const std::string dir = ws + "/replay_" + mode;
    const e2e::RunResult run = e2e::run_rlcore(
        {"--config", config, "trainer.total_training_steps=2", "trainer.default_local_dir=" + dir,
         "actor_rollout_ref.rollout.enable_rollout_routing_replay=true",
         "actor_rollout_ref.actor.router_replay.mode=" + mode, "actor_rollout_ref.rollout.dtype=bfloat16",
         "actor_rollout_ref.actor.fsdp_config.dtype=bfloat16",
         "actor_rollout_ref.actor.fsdp_config.moe_aux_loss_coeff=0.01"});
    INFO(mode << ": " << run.output);
    REQUIRE(run.status == 0);
    runs[mode] = e2e::read_metrics(dir);
    REQUIRE(runs[mode].size() == 2);
    for (const auto& [step, m] : runs[mode]) {
      CHECK(m.at("actor/moe_aux_loss") > 0);
      CHECK(m.count("actor/moe_z_loss") == 1);
    }
  }
  // The first step's rollout is the same in every mode (same weights, same seeds); only the old-log-prob pass differs.
  const auto& off = runs["disabled"].at(1);
  const auto& r3 = runs["R3"].at(1);
  CHECK(r3.at("training/rollout_routing_mismatch") == 0.0);  // R3's pass routes as the rollout did, exactly
  CHECK(off.at("training/rollout_routing_mismatch") > 0.0);  // bf16 decode vs full forward: some near-ties flip
  CHECK(r3.at("training/rollout_probs_diff_max") <= off.at("training/rollout_probs_diff_max"));
  CHECK(runs["R2"].at(1).at("training/rollout_routing_mismatch") ==
        off.at("training/rollout_routing_mismatch"));  // R2 records its own routing, as disabled does
  fs::remove_all(ws);
}

TEST_CASE("routing replay refuses, by key, what cannot work") {
  const std::string ws = moe_e2e::moe_workspace("moe_replay_refused");
  const std::string config = e2e::write_config(ws, "refused", e2e::kQuickGrpo);
  const e2e::RunResult r3_alone = e2e::run_rlcore(
      {"--config", config, "actor_rollout_ref.actor.router_replay.mode=R3", "trainer.total_training_steps=1"});
  CHECK(r3_alone.status != 0);
  CHECK_THAT(r3_alone.output, Catch::Contains("enable_rollout_routing_replay=true"));
  const e2e::RunResult async =
      e2e::run_rlcore({"--config", config, "actor_rollout_ref.rollout.enable_rollout_routing_replay=true",
                       "async_training.mode=one_step_off", "trainer.total_training_steps=1"});
  CHECK(async.status != 0);
  CHECK_THAT(async.output, Catch::Contains("synchronous single-turn"));
  fs::remove_all(ws);
}
