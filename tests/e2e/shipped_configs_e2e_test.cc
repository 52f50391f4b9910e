// Every config shipped in configs/ runs: two steps each, from a scratch
// workspace standing in for the quickstart's runs/ (a random tiny model and the
// arithmetic task), with the metric only that config's path produces, and
// every metrics sink (console, metrics.jsonl, TensorBoard events: the
// tensorboard package reads back each metrics.jsonl value under its verl name).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "e2e_testing.h"
#include "../common/reference_python.h"
#include "../common/test_paths.h"

namespace fs = std::filesystem;

namespace {

// Every finite value of metrics.jsonl is the TensorBoard scalar of that tag and
// step (as float32), and TensorBoard holds no step metrics.jsonl lacks.
void check_tensorboard_matches(const std::string& run_dir,
                               const std::map<int64_t, std::map<std::string, double>>& metrics) {
  const nlohmann::json board = nlohmann::json::parse(rlcore_test::run_reference(
      rlcore_test::reference_script("core/metrics/reference/tensorboard_reference.py"), {run_dir + "/tensorboard"}));
  CHECK(board["files"] == 1);
  for (const auto& [tag, points] : board["scalars"].items()) {
    for (const auto& point : points) CHECK(metrics.count(point[0].get<int64_t>()) == 1);
  }
  for (const auto& [step, values] : metrics) {
    for (const auto& [tag, value] : values) {
      INFO(tag << " at step " << step);
      REQUIRE(board["scalars"].contains(tag));
      bool found = false;
      for (const auto& point : board["scalars"][tag]) {
        if (point[0] != step) continue;
        found = true;
        CHECK(point[1].get<double>() == static_cast<double>(static_cast<float>(value)));
      }
      CHECK(found);
    }
  }
}

// What each shipped config must produce beyond the common metrics.
const std::map<std::string, std::string> kPathMetric = {
    {"quickstart.yaml", "critic/advantages/mean"},  // GRPO
    {"quickstart_sft.yaml", "sft/loss"},            // SFT
    {"ppo_arithmetic.yaml", "critic/vf_loss"},      // GAE: a critic trains
    {"rloo_arithmetic.yaml", "critic/advantages/mean"},
    {"grpo_megatron.yaml", "actor/pg_loss"},             // megatron tp=2 actor
    {"grpo_gsm8k_style.yaml", "actor/kl_loss"},          // GRPO with the KL loss (on the arithmetic data here)
    {"dapo_arithmetic.yaml", "train/num_gen_batches"},   // dynamic sampling
    {"grpo_lora_arithmetic.yaml", "actor/pg_loss"},      // and the adapter below
    {"grpo_tool_arithmetic.yaml", "num_turns/mean"},     // the agent loop (on the arithmetic-tool data)
    {"grpo_tool_arithmetic_sft.yaml", "sft/loss"},       // multi-turn demonstrations
    {"grpo_one_step_off.yaml", "async/staleness/mean"},  // a standalone rollout pool, one step off
    {"grpo_fully_async.yaml", "fully_async/partial/partial_ratio"},  // streaming, partial rollouts
    {"grpo_moe_ep2.yaml", "training/rollout_routing_mismatch"},      // a mixture of experts, ep=2, R3 replay
};

// Configs written for another architecture than the workspace's tiny model: a tiny one of it.
const std::map<std::string, std::string> kModelArch = {
    {"grpo_moe_ep2.yaml", "qwen3_moe"},
};

// What a config's path writes that no other does, in its step-2 checkpoint (saved for these).
const std::map<std::string, std::string> kPathCheckpointFile = {
    {"grpo_lora_arithmetic.yaml", "actor/lora_adapter/adapter_config.json"},
};

// Overrides that keep a config's two steps short on the tiny model: only the path is exercised
// here (the learning runs are the quickstart's and the e2e tests'), so the batches shrink.
const std::map<std::string, std::vector<std::string>> kShortRun = {
    {"grpo_gsm8k_style.yaml", {"data.max_response_length=8"}},
    // A random model scores 0 on arithmetic, so dynamic sampling would drop every group: the
    // test grader's reward (the share of lowercase letters) varies within a group.
    {"dapo_arithmetic.yaml", {"reward.grader=lowercase_fraction"}},
    {"grpo_tool_arithmetic.yaml",
     {"data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=8", "actor_rollout_ref.rollout.n=2"}},
    {"grpo_tool_arithmetic_sft.yaml", {"data.train_batch_size=16"}},
    {"grpo_fully_async.yaml", {"data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=16"}},
    {"grpo_one_step_off.yaml", {"data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=16"}},
    {"ppo_arithmetic.yaml", {"data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8"}},
};

// The runs' shared inputs, made once per process: Catch runs the test case again for each config's
// section, and the tiny models and task data are the same for all of them.
struct Workspace {
  fs::path dir;
  std::string data_dir, tool_data_dir;

  Workspace() : dir(e2e::make_workspace("configs", 8)) {
    data_dir = (dir / "data").string();
    make({"data", "make", "--task", "arithmetic", "--seed", "1", "--val", "16", "--out", data_dir});
    tool_data_dir = (dir / "tool_data").string();
    make({"data", "make", "--task", "arithmetic-tool", "--seed", "1", "--val", "16", "--train", "512", "--out",
          tool_data_dir});
    for (const auto& [config, arch] : kModelArch) {
      make({"model", "init", "--arch", arch, "--size", "tiny", "--seed", "1", "--out",
            (dir / ("model_" + arch)).string()});
    }
  }
  ~Workspace() { fs::remove_all(dir); }

  static void make(const std::vector<std::string>& args) {
    const e2e::RunResult made = e2e::run_rlcore(args);
    INFO(made.output);
    REQUIRE(made.status == 0);
  }
};

}  // namespace

TEST_CASE("every config in configs/ runs two steps", "[e2e][configs]") {
  ::unsetenv("TENSORBOARD_DIR");  // the runs write events under their own run directories
  static const Workspace shared;
  const fs::path& workspace = shared.dir;
  const std::string& data_dir = shared.data_dir;
  const std::string& tool_data_dir = shared.tool_data_dir;

  std::vector<fs::path> configs;
  for (const auto& entry : fs::directory_iterator(fs::path(rlcore_test::source_dir()) / "configs")) {
    if (entry.path().extension() == ".yaml") configs.push_back(entry.path());
  }
  std::sort(configs.begin(), configs.end());
  REQUIRE(configs.size() == kPathMetric.size());  // a new config needs its metric above

  for (const fs::path& config : configs) {
    const std::string name = config.filename().string();
    SECTION(name) {
      REQUIRE(kPathMetric.count(name) == 1);
      const bool sft = name.find("sft") != std::string::npos;
      const bool tool = name.find("tool") != std::string::npos;
      const std::string& task_dir = tool ? tool_data_dir : data_dir;
      const std::string run_dir = (workspace / ("run_" + config.stem().string())).string();
      std::vector<std::string> args = {
          "--config",
          config.string(),
          "trainer.default_local_dir=" + run_dir,
          "trainer.total_training_steps=2",
          "trainer.test_freq=-1",
          "trainer.save_freq=-1",
          "trainer.val_before_train=false",
          "trainer.stop_at_val_reward=0",
          "trainer.logger=[console,jsonl,tensorboard]",
          "data.train_files=" + task_dir + (sft ? "/sft.jsonl" : "/train.jsonl"),
          "data.val_files=" + task_dir + "/val.jsonl",
          "actor_rollout_ref.model.path=" +
              (workspace / (kModelArch.count(name) ? "model_" + kModelArch.at(name) : std::string("model"))).string()};
      if (sft) args.insert(args.begin(), "sft");
      if (kShortRun.count(name)) args.insert(args.end(), kShortRun.at(name).begin(), kShortRun.at(name).end());
      if (kPathCheckpointFile.count(name)) args.push_back("trainer.save_freq=2");
      if (tool) {  // the tool list is named relative to the source tree
        args.push_back("actor_rollout_ref.rollout.multi_turn.tool_config_path=" + rlcore_test::source_dir() +
                       "/configs/tools/calculator.yaml");
      }
      const e2e::RunResult run = e2e::run_rlcore(args);
      INFO(run.output);
      REQUIRE(run.status == 0);
      const auto metrics = e2e::read_metrics(run_dir);
      REQUIRE(metrics.count(2) == 1);
      CHECK(metrics.at(2).count(kPathMetric.at(name)) == 1);
      if (kPathCheckpointFile.count(name))
        CHECK(fs::exists(fs::path(run_dir) / "checkpoints/global_step_2" / kPathCheckpointFile.at(name)));
      check_tensorboard_matches(run_dir, metrics);
      fs::remove_all(run_dir);
    }
  }
}
