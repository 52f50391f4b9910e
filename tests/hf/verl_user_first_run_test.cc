// A verl user's first run: a tiny Qwen3 checkpoint written by transformers
// with the real Qwen3 tokenizer (151k tokens) and its files unchanged, a
// gsm8k-style parquet file in verl's GSM8K layout (data_source openai/gsm8k
// routed to the gsm8k grader, chat-message prompts rendered by Qwen3's own
// template, reward_model.ground_truth) and a verl-style config, trained for a
// few GRPO steps by `rlcore --config` with every metrics sink.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include <catch2/catch.hpp>

#include "../common/reference_python.h"
#include "../common/test_paths.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Run {
  int status = -1;
  std::string output;
};

Run run_rlcore(const std::vector<std::string>& args, const fs::path& log) {
  std::string command = rlcore_test::rlcore_executable();
  for (const auto& arg : args) command += " '" + arg + "'";
  command += " --plugins '" + rlcore_test::plugin_build_dir() + "' > '" + log.string() + "' 2>&1";
  const int raw = std::system(command.c_str());
  std::ifstream in(log);
  std::ostringstream text;
  text << in.rdbuf();
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, text.str()};
}

std::map<int64_t, json> metrics_by_step(const fs::path& run_dir) {
  std::map<int64_t, json> steps;
  std::ifstream in(run_dir / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const json record = json::parse(line);
    steps[record["step"].get<int64_t>()] = record;
  }
  return steps;
}

}  // namespace

TEST_CASE("a transformers-written Qwen3 with its real tokenizer trains on a gsm8k-style parquet file", "[hf][e2e]") {
  const fs::path dir = fs::path(rlcore_test::binary_dir()) / "hf_tests" / "verl_first_run";
  fs::remove_all(dir);
  fs::create_directories(dir);
  rlcore_test::run_reference(rlcore_test::reference_script("hf/reference/hf_models.py"),
                             {"chat_model", "qwen3", rlcore_test::source_dir() + "/tests/fixtures/tokenizers/qwen3",
                              (dir / "model").string()});

  // verl's GSM8K parquet files (examples/data_preprocess/gsm8k.py's layout), made by rlcore.
  const Run made = run_rlcore(
      {"data", "make", "--task", "gsm8k-style", "--out", (dir / "gsm8k").string(), "--train", "16", "--test", "4"},
      dir / "data.log");
  INFO(made.output);
  REQUIRE(made.status == 0);
  const fs::path data = dir / "gsm8k" / "train.parquet";
  REQUIRE(fs::exists(data));

  // verl's key layout; only the engine names are rlcore's.
  std::ofstream(dir / "config.yaml") << R"(
trainer:
  project_name: verl_first_run
  experiment_name: qwen3_gsm8k
  logger: ['console', 'jsonl', 'tensorboard']
  total_training_steps: 3
  save_freq: -1
  test_freq: -1
  val_before_train: false
  resume_mode: disable
data:
  train_files: )" << data.string() << R"(
  prompt_key: prompt
  max_prompt_length: 160
  max_response_length: 16
  train_batch_size: 4
  apply_chat_template_kwargs: {enable_thinking: false}
actor_rollout_ref:
  model: {path: )" << (dir / "model").string()
                                     << R"(}
  actor:
    strategy: fsdp
    ppo_mini_batch_size: 4
    optim: {lr: 1.0e-4}
  rollout: {name: native, n: 2, temperature: 1.0}
algorithm: {adv_estimator: grpo}
)";
  const fs::path run_dir = dir / "run";
  const Run run = run_rlcore(
      {"--config", (dir / "config.yaml").string(), "trainer.default_local_dir=" + run_dir.string()}, dir / "train.log");
  INFO(run.output);
  REQUIRE(run.status == 0);
  const auto metrics = metrics_by_step(run_dir);
  REQUIRE(metrics.size() == 3);
  for (const auto& [step, record] : metrics) {
    CHECK(record.contains("critic/score/mean"));
    CHECK(record.contains("actor/pg_loss"));
  }
  bool events = false;
  for (const auto& file : fs::directory_iterator(run_dir / "tensorboard")) {
    events = events || file.path().filename().string().find("tfevents") != std::string::npos;
  }
  CHECK(events);
  fs::remove_all(dir);
}
