// One-step-off-policy training (async_training.mode: one_step_off,
// docs/async.md) end to end: an actor pool of two and a standalone rollout
// pool of two, the weights over the bridge after every update. The reward is
// learned; every batch but the first is one update stale; the rollout pool
// validates with exactly the weights the actor saved; a resumed run draws the
// batches the uninterrupted one would; what it cannot run is refused before
// any worker starts; a rollout worker that dies ends the run naming it.
#include "e2e_testing.h"

#include "../common/server_process.h"
#include "../common/test_paths.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace async_e2e {

const std::string kOneStepOff = std::string(e2e::kLearningGrpo) + R"(
async_training: {mode: one_step_off}
rollout: {nnodes: 1, n_gpus_per_node: 2}
)";

// `field` ("input": the prompt, "output": the response) of each row of each
// step, from a trainer.rollout_data_dir or validation_data_dir dump.
std::map<int64_t, std::vector<std::string>> dumped(const fs::path& dir, const std::string& field) {
  std::map<int64_t, std::vector<std::string>> rows;
  for (const auto& file : fs::directory_iterator(dir)) {
    const int64_t step = std::stoll(file.path().stem().string());
    std::ifstream in(file.path());
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) rows[step].push_back(nlohmann::json::parse(line).at(field).get<std::string>());
    }
  }
  return rows;
}

}  // namespace async_e2e

using namespace async_e2e;

TEST_CASE("one-step-off GRPO learns with batches one update stale, and validates with the actor's weights",
          "[e2e][async]") {
  const std::string ws = e2e::make_workspace("one_step_off");
  const std::string config = e2e::write_config(ws, "osp", kOneStepOff);
  const std::string prompts = ws + "/prompts.jsonl";
  e2e::RunResult run = e2e::run_rlcore({"--config", config, "trainer.total_training_steps=12", "trainer.test_freq=12",
                                        "trainer.save_freq=12", "data.val_files=" + prompts,
                                        "trainer.validation_data_dir=" + ws + "/pool_validation"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/osp");
  REQUIRE(metrics.count(12) == 1);
  CHECK(e2e::mean_over_steps(metrics, "critic/score/mean", 10, 12) >
        e2e::mean_over_steps(metrics, "critic/score/mean", 1, 3) + 0.2);
  CHECK(metrics.at(1).at("async/staleness/mean") == 0);
  for (int64_t step = 2; step <= 12; ++step) {
    INFO("step " << step);
    CHECK(metrics.at(step).at("async/staleness/max") == 1);
    CHECK(metrics.at(step).at("async/weight_version") == step - 2);
    CHECK(metrics.at(step).at("perf/weight_sync_bytes") > 0);
    CHECK(metrics.at(step).at("trainer/idle_ratio") >= 0);
    CHECK(metrics.at(step).at("trainer/idle_ratio") <= 1);
    CHECK(metrics.at(step).at("rollouter/idle_ratio") >= 0);
  }
  // The last validation ran on the rollout pool after the last sync; the same
  // validation on the colocated rollout from the step-12 checkpoint (greedy)
  // writes the same responses, so the pool held exactly the actor's weights.
  run = e2e::run_rlcore({"--config", config, "async_training.mode=sync", "trainer.val_only=true",
                         "trainer.resume_mode=resume_path",
                         "trainer.resume_from_path=" + ws + "/osp/checkpoints/global_step_12",
                         "trainer.default_local_dir=" + ws + "/val_only", "data.val_files=" + prompts,
                         "trainer.validation_data_dir=" + ws + "/colocated_validation"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto pool_responses = dumped(ws + "/pool_validation", "output");
  const auto colocated_responses = dumped(ws + "/colocated_validation", "output");
  REQUIRE(pool_responses.count(12) == 1);
  REQUIRE(colocated_responses.count(12) == 1);
  CHECK(pool_responses.at(12).size() == 64);
  CHECK(pool_responses.at(12) == colocated_responses.at(12));
  fs::remove_all(ws);
}

TEST_CASE("a resumed one-step-off run draws the batches the uninterrupted run draws", "[e2e][async]") {
  const std::string ws = e2e::make_workspace("one_step_off_resume");
  const std::string config = e2e::write_config(ws, "osp", kOneStepOff);
  const auto run_to = [&](const std::string& dir, int steps, const std::string& resume) {
    const e2e::RunResult run = e2e::run_rlcore(
        {"--config", config, "trainer.total_training_steps=" + std::to_string(steps), "trainer.save_freq=2",
         "trainer.resume_mode=" + resume, "trainer.default_local_dir=" + ws + "/" + dir,
         "trainer.rollout_data_dir=" + ws + "/" + dir + "/dump"});
    INFO(run.output);
    REQUIRE(run.status == 0);
  };
  run_to("whole", 4, "disable");
  run_to("halves", 2, "disable");
  run_to("halves", 4, "auto");
  const auto whole = dumped(ws + "/whole/dump", "input");
  const auto halves = dumped(ws + "/halves/dump", "input");
  REQUIRE(whole.size() == 4);
  REQUIRE(halves.size() == 4);
  for (int64_t step = 1; step <= 4; ++step) {
    INFO("step " << step);
    CHECK(halves.at(step) == whole.at(step));
  }
  fs::remove_all(ws);
}

TEST_CASE("one-step-off refuses the steps that generate within themselves, before any worker starts", "[e2e][async]") {
  const std::string ws = e2e::make_workspace("one_step_off_refusals", 8);
  const std::string config = e2e::write_config(ws, "osp", kOneStepOff);
  e2e::RunResult run = e2e::run_rlcore({"--config", config, "algorithm.filter_groups.enable=true"});
  CHECK(run.status != 0);
  CHECK_THAT(run.output, Catch::Contains("one_step_off does not run algorithm.filter_groups"));
  run = e2e::run_rlcore({"--config", config, "algorithm.adv_estimator=remax"});
  CHECK(run.status != 0);
  CHECK_THAT(run.output, Catch::Contains("one_step_off does not run algorithm.adv_estimator remax"));
  run = e2e::run_rlcore({"--config", config, "async_training.max_staleness=1"});
  CHECK(run.status != 0);
  CHECK_THAT(run.output, Catch::Contains("async_training.max_staleness applies to async_training.mode: fully_async"));
  run = e2e::run_rlcore({"--config", config, "async_training.mode=fully_async", "async_training.max_staleness=1",
                         "async_training.trigger_parameter_sync_step=4"});
  CHECK(run.status != 0);
  CHECK_THAT(run.output,
             Catch::Contains("async_training.max_staleness 1 is below trigger_parameter_sync_step - 1 (3)"));
  fs::remove_all(ws);
}

TEST_CASE("a rollout worker that dies mid-generation ends the run with an error naming it", "[e2e][async]") {
  const std::string ws = e2e::make_workspace("one_step_off_fault", 16);
  const std::string config = e2e::write_config(ws, "osp", kOneStepOff);
  const e2e::RunResult run =
      e2e::run_rlcore({"--config", config, "trainer.total_training_steps=4"}, "RLCORE_FAULT=rollout.generate:kill#3");
  INFO(run.output);
  CHECK(run.status != 0);
  CHECK_THAT(run.output, Catch::Contains("kill at rollout.generate"));
  CHECK_THAT(run.output, Catch::Contains("of pool 'rollout', its rank") && Catch::Contains("was lost"));
  fs::remove_all(ws);
}

TEST_CASE("an actor worker that dies while sending its weights ends the run, the rollout pool with it",
          "[e2e][async]") {
  const std::string ws = e2e::make_workspace("one_step_off_actor_fault", 16);
  const std::string config = e2e::write_config(ws, "osp", kOneStepOff);
  // The second sync (after step 2's update): the rollout ranks wait in the bridge's broadcast.
  const e2e::RunResult run = e2e::run_rlcore({"--config", config, "trainer.total_training_steps=4"},
                                             "RLCORE_FAULT=actor.send_weights:kill@0#2");
  INFO(run.output);
  CHECK(run.status != 0);
  CHECK_THAT(run.output, Catch::Contains("kill at actor.send_weights"));
  CHECK_THAT(run.output,
             Catch::Contains("worker rank 0 (host") && Catch::Contains("of pool 'global', its rank 0 was lost"));
  fs::remove_all(ws);
}

TEST_CASE("fully async GRPO learns within its staleness bound", "[e2e][async]") {
  const std::string ws = e2e::make_workspace("fully_async");
  const std::string config = e2e::write_config(ws, "fa", std::string(e2e::kLearningGrpo) + R"(
async_training: {mode: fully_async, staleness_threshold: 0.5, trigger_parameter_sync_step: 2, partial_rollout: true,
                 decode_steps_per_call: 1}
rollout: {nnodes: 1, n_gpus_per_node: 2}
)");
  const e2e::RunResult run = e2e::run_rlcore({"--config", config, "trainer.total_training_steps=12"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/fa");
  REQUIRE(metrics.count(12) == 1);
  CHECK(e2e::mean_over_steps(metrics, "critic/score/mean", 10, 12) >
        e2e::mean_over_steps(metrics, "critic/score/mean", 1, 3) + 0.2);
  // A prompt started after the sync at version v is trained by step v + 2 (its window) or, among the
  // staleness_threshold's extra prompts, in the next window: at most (1 + ceil(0.5)) x 2 - 1 updates stale.
  for (const auto& [step, values] : metrics) {
    INFO("step " << step);
    CHECK(values.at("async/staleness/max") <= 3);
    CHECK(values.at("fully_async/partial/max_partial_span") <= values.at("async/staleness/max"));
    if (step % 2 == 0) CHECK(values.count("timing_s/sync_rollout_weights") == 1);
  }
  fs::remove_all(ws);
}

TEST_CASE("partial rollouts: responses in flight at a sync finish under the new weights, each token tagged",
          "[e2e][async]") {
  const std::string ws = e2e::make_workspace("fully_async_partial", 32);
  // One decode step per call and a sync every step. The first sync comes after one step's training; by then
  // the pool (8 prompts in flight) is still far from its budget of (1 + 10) x 8 prompts, so responses are in
  // flight. A rollout faster than the trainer queues ready groups ahead of them, but they are among the
  // budget's 88 prompts, so the trainer has taken them by step 88 / 8 + 1 = 12 whatever the machine's load.
  const std::string config = e2e::write_config(ws, "fa", std::string(e2e::kQuickGrpo) + R"(
async_training: {mode: fully_async, staleness_threshold: 10.0, trigger_parameter_sync_step: 1, partial_rollout: true,
                 decode_steps_per_call: 1}
rollout: {nnodes: 1, n_gpus_per_node: 1}
)");
  const e2e::RunResult run =
      e2e::run_rlcore({"--config", config, "trainer.total_training_steps=12", "data.max_response_length=48"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/fa");
  double partial = 0;
  for (const auto& [step, values] : metrics) {
    INFO("step " << step);
    CHECK(values.at("async/staleness/max") <= 10);  // (1 + ceil(10)) x 1 - 1
    CHECK(values.at("fully_async/partial/max_partial_span") <= values.at("async/staleness/max"));
    partial = std::max(partial, values.at("fully_async/partial/partial_ratio"));
  }
  CHECK(partial > 0);
  fs::remove_all(ws);
}

TEST_CASE("max_staleness drops the groups staler than it; the pool replaces them", "[e2e][async]") {
  const std::string ws = e2e::make_workspace("fully_async_drop", 32);
  // A sync every step lands mid-response (one decode step per call), so the groups in flight then hold tokens
  // of the old weights: with max_staleness 0 they are dropped, and only groups sampled wholly by the step's
  // own weights are trained on.
  const std::string config = e2e::write_config(ws, "fa", std::string(e2e::kQuickGrpo) + R"(
async_training: {mode: fully_async, staleness_threshold: 10.0, trigger_parameter_sync_step: 1, partial_rollout: true,
                 decode_steps_per_call: 1, max_staleness: 0}
rollout: {nnodes: 1, n_gpus_per_node: 1}
)");
  const e2e::RunResult run =
      e2e::run_rlcore({"--config", config, "trainer.total_training_steps=4", "data.max_response_length=24"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/fa");
  REQUIRE(metrics.size() == 4);
  double dropped = 0;
  for (const auto& [step, values] : metrics) {
    INFO("step " << step);
    CHECK(values.at("async/staleness/max") == 0);
    CHECK(values.at("fully_async/partial/partial_ratio") == 0);
    dropped += values.at("async/stale_dropped");
  }
  CHECK(dropped > 0);
  fs::remove_all(ws);
}

TEST_CASE("fully async without partial rollouts: no sample spans two versions; staleness 0 keeps it on policy",
          "[e2e][async]") {
  const std::string ws = e2e::make_workspace("fully_async_whole", 32);
  const std::string config = e2e::write_config(ws, "fa", std::string(e2e::kQuickGrpo) + R"(
async_training: {mode: fully_async, staleness_threshold: 0.0, trigger_parameter_sync_step: 1, partial_rollout: false,
                 decode_steps_per_call: 1}
rollout: {nnodes: 1, n_gpus_per_node: 1}
)");
  const e2e::RunResult run = e2e::run_rlcore({"--config", config, "trainer.total_training_steps=4"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/fa");
  REQUIRE(metrics.size() == 4);
  for (const auto& [step, values] : metrics) {
    INFO("step " << step);
    CHECK(values.at("fully_async/partial/partial_ratio") == 0);
    CHECK(values.at("async/staleness/max") == 0);  // a window's prompts are its step's: on policy
  }
  fs::remove_all(ws);
}

TEST_CASE("one step off with the rollout on a vLLM-style server: its weights reloaded from disk after each update",
          "[e2e][async]") {
  const std::string ws = e2e::make_workspace("one_step_off_bridge");
  rlcore_test::ServerProcess server(rlcore_test::rlcore_executable(),
                                    {"--model", ws + "/model", "--port", "0", "--dev-mode", "--served-model-name",
                                     "policy", "--plugins", rlcore_test::plugin_build_dir(), "--log-level", "warn"});
  const std::string config = e2e::write_config(ws, "osp", kOneStepOff);
  const e2e::RunResult run = e2e::run_rlcore({"--config", config, "trainer.total_training_steps=12",
                                              "rollout.n_gpus_per_node=1", "actor_rollout_ref.rollout.name=vllm_bridge",
                                              "actor_rollout_ref.rollout.server_url=" + server.url(),
                                              "actor_rollout_ref.rollout.weights_dir=" + ws + "/weights"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/osp");
  REQUIRE(metrics.count(12) == 1);
  // The bridge checks before every generation that the server reports the version last synced.
  for (int64_t step = 2; step <= 12; ++step) CHECK(metrics.at(step).at("async/staleness/max") == 1);
  CHECK(e2e::mean_over_steps(metrics, "critic/score/mean", 10, 12) >
        e2e::mean_over_steps(metrics, "critic/score/mean", 1, 3) + 0.1);
  server.stop();
  fs::remove_all(ws);
}

TEST_CASE("a fully async run saved mid-stream resumes from its checkpoint and finishes", "[e2e][async]") {
  const std::string ws = e2e::make_workspace("fully_async_resume", 32);
  const std::string config = e2e::write_config(ws, "fa", std::string(e2e::kQuickGrpo) + R"(
async_training: {mode: fully_async, staleness_threshold: 1.0, trigger_parameter_sync_step: 2, decode_steps_per_call: 1}
rollout: {nnodes: 1, n_gpus_per_node: 1}
)");
  e2e::RunResult run = e2e::run_rlcore({"--config", config, "trainer.total_training_steps=2", "trainer.save_freq=2"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  run = e2e::run_rlcore(
      {"--config", config, "trainer.total_training_steps=4", "trainer.save_freq=2", "trainer.resume_mode=auto"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  CHECK_THAT(run.output, Catch::Contains("resumed from") && Catch::Contains("(step 2)"));
  const auto metrics = e2e::read_metrics(ws + "/fa");
  REQUIRE(metrics.count(4) == 1);
  // The pool got the resumed actor's weights before its first request: nothing older than step 2.
  CHECK(metrics.at(3).at("async/staleness/max") <= 1);
  fs::remove_all(ws);
}
