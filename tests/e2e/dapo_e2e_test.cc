// DAPO through the trainer: dynamic sampling (algorithm.filter_groups) and
// overlong shaping (reward.overlong_buffer) with real workers.
#include "e2e_testing.h"

#include <filesystem>

namespace fs = std::filesystem;

namespace {

const char* const kDapo = R"(
actor_rollout_ref:
  actor:
    ppo_mini_batch_size: 8
    clip_ratio_low: 0.2
    clip_ratio_high: 0.28
    loss_agg_mode: token-mean
    optim: {lr: 0.003, weight_decay: 0.0}
  rollout: {n: 4, temperature: 1.0}
algorithm:
  adv_estimator: grpo
  filter_groups: {enable: true, metric: reward, max_num_gen_batches: 4}
)";

}  // namespace

TEST_CASE("DAPO runs with dynamic sampling and reports the overlong shaping") {
  const std::string ws = e2e::make_workspace("dapo");
  const std::string config = e2e::write_config(ws, "dapo", kDapo);
  const e2e::RunResult run =
      e2e::run_rlcore({"--config", config, "trainer.total_training_steps=2", "reward.overlong_buffer.enable=true",
                       "reward.overlong_buffer.len=2", "reward.overlong_buffer.log=true"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/dapo");
  REQUIRE(metrics.size() == 2);
  for (const auto& [step, values] : metrics) {
    INFO("step " << step);
    CHECK(values.at("train/num_gen_batches") >= 1);
    CHECK(values.at("train/num_gen_batches") <= 4);
    // A response of the 6-token limit reaches 2 tokens into the 2-token buffer: -1 at most.
    CHECK(values.at("critic/score_extra/overlong_reward") <= 0);
    CHECK(values.at("critic/score_extra/overlong_reward") >= -1);
    CHECK(values.count("critic/score_extra/overlong") == 1);
    CHECK(values.count("actor/pg_clipfrac") == 1);
  }
  fs::remove_all(ws);
}

TEST_CASE("DAPO stops naming max_num_gen_batches when no group has a varied metric") {
  const std::string ws = e2e::make_workspace("dapo_stuck", 16);
  const std::string config = e2e::write_config(ws, "dapo", kDapo);
  // A buffer as long as the responses makes every response overlong: the filter
  // metric `overlong` is 1 everywhere, so every group is dropped.
  const e2e::RunResult run =
      e2e::run_rlcore({"--config", config, "trainer.total_training_steps=2", "algorithm.filter_groups.metric=overlong",
                       "algorithm.filter_groups.max_num_gen_batches=2", "reward.overlong_buffer.enable=true",
                       "reward.overlong_buffer.len=6", "reward.overlong_buffer.log=true"});
  INFO(run.output);
  CHECK(run.status != 0);
  CHECK_THAT(run.output, Catch::Contains("after 2 generation batches only 0 of 8 prompts") &&
                             Catch::Contains("algorithm.filter_groups.max_num_gen_batches = 2"));
  // Without a bound, a whole epoch without an informative group stops the run instead of looping.
  const e2e::RunResult unbounded =
      e2e::run_rlcore({"--config", config, "trainer.total_training_steps=2", "algorithm.filter_groups.metric=overlong",
                       "algorithm.filter_groups.max_num_gen_batches=0", "reward.overlong_buffer.enable=true",
                       "reward.overlong_buffer.len=6", "reward.overlong_buffer.log=true"});
  CHECK(unbounded.status != 0);
  CHECK_THAT(unbounded.output, Catch::Contains("a whole epoch of prompts"));
  fs::remove_all(ws);
}

TEST_CASE("bad DAPO keys fail before any worker starts, naming them") {
  const std::string ws = e2e::make_workspace("dapo_bad", 8);
  const std::string config = e2e::write_config(ws, "dapo", kDapo);
  const e2e::RunResult zero = e2e::run_rlcore({"--config", config, "reward.overlong_buffer.enable=true"});
  CHECK(zero.status != 0);
  CHECK_THAT(zero.output, Catch::Contains("reward.overlong_buffer.len") && Catch::Contains("must be > 0"));
  const e2e::RunResult longer =
      e2e::run_rlcore({"--config", config, "reward.overlong_buffer.enable=true", "reward.overlong_buffer.len=7"});
  CHECK(longer.status != 0);
  CHECK_THAT(longer.output, Catch::Contains("longer than data.max_response_length = 6"));
  fs::remove_all(ws);
}
