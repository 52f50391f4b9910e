// Every config shipped in configs/ runs: two steps each, from a scratch
// workspace standing in for the quickstart's runs/ (a random tiny model and the
// arithmetic task), with the metric only that config's path produces, and
// every metrics sink (console, metrics.jsonl, TensorBoard events).
#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "e2e_testing.h"

namespace fs = std::filesystem;

namespace {

// What each shipped config must produce beyond the common metrics.
const std::map<std::string, std::string> kPathMetric = {
    {"quickstart.yaml", "critic/advantages/mean"},    // GRPO
    {"quickstart_sft.yaml", "sft/loss"},              // SFT
    {"ppo_arithmetic.yaml", "critic/vf_loss"},        // GAE: a critic trains
    {"rloo_arithmetic.yaml", "critic/advantages/mean"},
    {"grpo_megatron.yaml", "actor/pg_loss"},          // megatron tp=2 actor
};

}  // namespace

TEST_CASE("every config in configs/ runs two steps", "[e2e][configs]") {
  const fs::path workspace = fs::path(e2e::make_workspace("configs", 8));
  const std::string data_dir = (workspace / "data").string();
  const e2e::RunResult data = e2e::run_rlcore({"data", "make", "--task", "arithmetic", "--seed", "1", "--val", "16",
                                               "--out", data_dir});
  INFO(data.output);
  REQUIRE(data.status == 0);

  std::vector<fs::path> configs;
  for (const auto& entry : fs::directory_iterator(fs::path(RLCORE_SOURCE_DIR) / "configs")) {
    if (entry.path().extension() == ".yaml") configs.push_back(entry.path());
  }
  std::sort(configs.begin(), configs.end());
  REQUIRE(configs.size() == kPathMetric.size());  // a new config needs its metric above

  for (const fs::path& config : configs) {
    const std::string name = config.filename().string();
    SECTION(name) {
      REQUIRE(kPathMetric.count(name) == 1);
      const bool sft = name.find("sft") != std::string::npos;
      const std::string run_dir = (workspace / ("run_" + config.stem().string())).string();
      std::vector<std::string> args = {"--config", config.string(),
                                       "trainer.default_local_dir=" + run_dir,
                                       "trainer.total_training_steps=2",
                                       "trainer.test_freq=-1",
                                       "trainer.save_freq=-1",
                                       "trainer.val_before_train=false",
                                       "trainer.stop_at_val_reward=0",
                                       "trainer.logger=[console,jsonl,tensorboard]",
                                       "data.train_files=" + data_dir + (sft ? "/sft.jsonl" : "/train.jsonl"),
                                       "data.val_files=" + data_dir + "/val.jsonl",
                                       "actor_rollout_ref.model.path=" + (workspace / "model").string()};
      if (sft) args.insert(args.begin(), "sft");
      const e2e::RunResult run = e2e::run_rlcore(args);
      INFO(run.output);
      REQUIRE(run.status == 0);
      const auto metrics = e2e::read_metrics(run_dir);
      REQUIRE(metrics.count(2) == 1);
      CHECK(metrics.at(2).count(kPathMetric.at(name)) == 1);
      int event_files = 0;
      for (const auto& file : fs::directory_iterator(fs::path(run_dir) / "tensorboard")) {
        event_files += file.path().filename().string().find("tfevents") != std::string::npos ? 1 : 0;
      }
      CHECK(event_files == 1);
    }
  }
  fs::remove_all(workspace);
}
