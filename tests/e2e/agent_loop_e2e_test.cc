// The calculator task's configs at a reduced size (docs/agent-loop.md#the-calculator-task): a tiny
// model, SFT on demonstrations half of which call the calculator (220 steps of 64, where the
// shipped recipe takes 400 of 128), then multi-turn GRPO through the agent loop, rewarded (test-only
// grader tool_turn) for a tool turn as the reward function sees it in extra_info.__num_turns__.
// The model learns to reach for the tool: the tool-call rate and the reward rise in training and in
// greedy validation. The full task's accuracy rows (3 seeds) are in the doc.
#include "e2e_testing.h"

#include <filesystem>

#include "../common/test_paths.h"

namespace fs = std::filesystem;

TEST_CASE("multi-turn GRPO with the calculator: the tool-call rate rises", "[e2e][agent]") {
  const fs::path ws = fs::path(e2e::make_workspace("agent_loop", 1));
  const std::string source = rlcore_test::source_dir();
  const std::string data = (ws / "data").string();
  const std::string tools = "actor_rollout_ref.rollout.multi_turn.tool_config_path=" + source + "/configs/tools/calculator.yaml";
  e2e::RunResult run = e2e::run_rlcore({"model", "init", "--arch", "qwen2", "--size", "tiny", "--seed", "1", "--out",
                                        (ws / "tool_model").string()});
  REQUIRE(run.status == 0);
  run = e2e::run_rlcore({"data", "make", "--task", "arithmetic-tool", "--seed", "1", "--train", "8000", "--val", "64",
                         "--sft-tool-share", "0.5", "--out", data});
  INFO(run.output);
  REQUIRE(run.status == 0);

  run = e2e::run_rlcore({"sft", "--config", source + "/configs/grpo_tool_arithmetic_sft.yaml", tools,
                         "trainer.default_local_dir=" + (ws / "sft").string(), "trainer.total_training_steps=220",
                         "trainer.test_freq=-1", "data.train_batch_size=64", "actor_rollout_ref.actor.optim.lr=0.004",
                         "data.train_files=" + data + "/sft.jsonl", "data.val_files=" + data + "/val.jsonl",
                         "actor_rollout_ref.model.path=" + (ws / "tool_model").string()});
  INFO(run.output);
  REQUIRE(run.status == 0);

  run = e2e::run_rlcore({"--config", source + "/configs/grpo_tool_arithmetic.yaml", tools,
                         "trainer.default_local_dir=" + (ws / "grpo").string(), "trainer.total_training_steps=14",
                         "trainer.test_freq=14", "trainer.save_freq=-1", "data.train_batch_size=16",
                         "actor_rollout_ref.actor.ppo_mini_batch_size=16", "actor_rollout_ref.actor.optim.lr=0.0003",
                         "reward.grader=tool_turn",
                         "data.train_files=" + data + "/train.jsonl", "data.val_files=" + data + "/val.jsonl",
                         "actor_rollout_ref.model.path=" + (ws / "sft/hf").string()});
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = e2e::read_metrics((ws / "grpo").string());
  REQUIRE(metrics.count(14) == 1);
  const double calls_first = e2e::mean_over_steps(metrics, "agent/tool_call_rate", 1, 3);
  const double calls_last = e2e::mean_over_steps(metrics, "agent/tool_call_rate", 12, 14);
  CHECK(calls_last > calls_first + 0.2);
  // The reward is the tool turn, read from extra_info.__num_turns__: it follows the call rate exactly.
  CHECK(e2e::mean_over_steps(metrics, "critic/score/mean", 12, 14) == Approx(calls_last));
  const std::string val_calls = "val-aux/agent/tool_call_rate";
  CHECK(metrics.at(14).at(val_calls) > metrics.at(0).at(val_calls));
  CHECK(metrics.at(14).at("num_turns/mean") > 3.0);
  CHECK(metrics.at(14).at("agent/template_mismatch") < 0.5);
  fs::remove_all(ws);
}
