// GRPO with the rollout in other processes: two `rlcore serve --dev-mode`
// replicas play vLLM servers, the trainer drives them through rollout.name
// vllm_bridge (two workers, weights reloaded from disk by both every step), and
// the reward rises by the in-process run's bar.
#include "e2e_testing.h"

#include <filesystem>

#include "../common/server_process.h"
#include "../common/test_paths.h"

TEST_CASE("GRPO with the rollout on two vLLM-style servers learns like the in-process run") {
  const std::string ws = e2e::make_workspace("grpo_bridge");
  const std::vector<std::string> server_args = {"--model",     ws + "/model", "--port",
                                                "0",           "--dev-mode",  "--served-model-name",
                                                "policy",      "--plugins",   rlcore_test::plugin_build_dir(),
                                                "--log-level", "warn"};
  rlcore_test::ServerProcess server(rlcore_test::rlcore_executable(), server_args);
  rlcore_test::ServerProcess replica(rlcore_test::rlcore_executable(), server_args);
  const std::string config = e2e::write_config(ws, "grpo_bridge", e2e::kLearningGrpo);
  const e2e::RunResult run = e2e::run_rlcore(
      {"--config", config, "trainer.total_training_steps=12", "actor_rollout_ref.rollout.name=vllm_bridge",
       "actor_rollout_ref.rollout.server_url=[" + server.url() + ", " + replica.url() + "]",
       "actor_rollout_ref.rollout.weights_dir=" + ws + "/weights"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/grpo_bridge");
  REQUIRE(metrics.size() == 12);
  // The servers' log-probs are the trainer's: both run the weights of this very step (before every
  // generation the bridge checks that each server reports the version the trainer loaded).
  CHECK(metrics.at(12).at("training/rollout_probs_diff_max") < 1e-3);
  const double first = e2e::mean_over_steps(metrics, "critic/score/mean", 1, 3);
  const double last = e2e::mean_over_steps(metrics, "critic/score/mean", 10, 12);
  CHECK(last > first + 0.1);
  // One snapshot is kept (the last good one, for rollback), not one per step.
  int snapshots = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ws + "/weights")) snapshots += entry.is_directory();
  CHECK(snapshots == 1);
  server.stop();
  replica.stop();
  std::filesystem::remove_all(ws);
}

TEST_CASE("a rollout server that cannot be reached stops the run at once, naming it") {
  const std::string ws = e2e::make_workspace("grpo_bridge_down", 8);
  const std::string config = e2e::write_config(ws, "grpo_bridge_down", e2e::kLearningGrpo);
  const e2e::RunResult run = e2e::run_rlcore(
      {"--config", config, "trainer.total_training_steps=2", "actor_rollout_ref.rollout.name=vllm_bridge",
       "actor_rollout_ref.rollout.server_url=http://127.0.0.1:9", "actor_rollout_ref.rollout.max_retries=1",
       "actor_rollout_ref.rollout.retry_backoff_s=0.01"});
  INFO(run.output);
  CHECK(run.status != 0);
  CHECK_THAT(run.output,
             Catch::Contains("http://127.0.0.1:9/health: cannot connect") && Catch::Contains("after 2 attempts"));
  CHECK(e2e::read_metrics(ws + "/grpo_bridge_down").empty());  // not a single step
  std::filesystem::remove_all(ws);
}

TEST_CASE("multi-turn rollouts go through the bridge too: each turn's context as token ids") {
  const std::string ws = e2e::make_workspace("agent_bridge", 8);
  rlcore_test::ServerProcess server(rlcore_test::rlcore_executable(),
                                    {"--model", ws + "/model", "--port", "0", "--dev-mode", "--served-model-name",
                                     "policy", "--plugins", rlcore_test::plugin_build_dir(), "--log-level", "warn"});
  const std::string config = e2e::write_config(ws, "agent_bridge", e2e::kQuickGrpo);
  const e2e::RunResult run = e2e::run_rlcore(
      {"--config", config, "trainer.total_training_steps=2", "actor_rollout_ref.rollout.name=vllm_bridge",
       "actor_rollout_ref.rollout.server_url=" + server.url(),
       "actor_rollout_ref.rollout.weights_dir=" + ws + "/weights", "data.prompt_template=chat",
       "data.max_response_length=24", "actor_rollout_ref.rollout.multi_turn.enable=true",
       "actor_rollout_ref.rollout.multi_turn.tool_config_path=" + rlcore_test::source_dir() +
           "/configs/tools/calculator.yaml",
       "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics(ws + "/agent_bridge");
  REQUIRE(metrics.count(2) == 1);
  // A random model writes no tool call: one model turn per trajectory, through the agent loop.
  CHECK(metrics.at(2).at("num_turns/mean") == 2.0);
  CHECK(metrics.at(2).at("agent/tool_call_rate") == 0.0);
  CHECK(metrics.at(2).at("training/rollout_probs_diff_max") < 1e-3);
  server.stop();
  std::filesystem::remove_all(ws);
}
