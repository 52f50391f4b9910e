// The sandboxed `python` tool (configs/tools/python.yaml) inside a real RL run: SFT teaches a tiny
// model one constant call of it, then a GRPO step's trajectories make that call through the agent
// loop, and the tool's message in the dumped trajectories is what the sandbox printed: run by root,
// the code ran as nobody (uid 65534) and as PID 2 of its own PID namespace (bubblewrap's init is 1).
#include "e2e_testing.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/test_paths.h"

namespace fs = std::filesystem;

namespace {

constexpr const char* kProgram = "import os;print(os.getuid(),os.getpid())";
constexpr const char* kSandboxOutput = "65534 2\n";
// What the demonstrations show as the tool's answer: not kSandboxOutput, so that text in a
// trajectory can only have come from the sandbox, never from the model's memory.
constexpr const char* kDemonstratedOutput = "uid pid\n";

// RL prompts in verl's agent layout (train.jsonl), and the same records with a demonstration that
// calls python with kProgram (sft.jsonl).
void write_data(const fs::path& dir, int records) {
  const nlohmann::ordered_json call = {{"name", "python"}, {"arguments", {{"code", kProgram}}}};
  std::ofstream rl(dir / "train.jsonl");
  std::ofstream sft(dir / "sft.jsonl");
  for (int i = 0; i < records; ++i) {
    nlohmann::json record = {
        {"data_source", "sandbox_check"},
        {"agent_name", "tool_agent"},
        {"prompt", nlohmann::json::array({{{"role", "user"}, {"content", "Check " + std::to_string(i) + "."}}})},
        {"reward_model", {{"style", "rule"}, {"ground_truth", ""}}},
        {"extra_info", {{"index", i}, {"tools_kwargs", {{"python", {{"create_kwargs", nlohmann::json::object()}}}}}}}};
    rl << record.dump() << "\n";
    record["response"] =
        nlohmann::json::array({{{"role", "assistant"}, {"content", "<tool_call>" + call.dump() + "</tool_call>"}},
                               {{"role", "tool"}, {"content", kDemonstratedOutput}},
                               {{"role", "assistant"}, {"content", "Done."}}});
    sft << record.dump() << "\n";
  }
}

// A dumped response is decoded without special tokens, so the chat template's tool turn reads
// "</tool_call>\ntool\n<the tool's text>\nassistant\n".
struct DumpedCall {
  std::string code;       // the call's code argument, empty where the call is not valid JSON
  std::string tool_text;  // the tool message's content
};

bool parse_first_call(const std::string& output, DumpedCall& call) {
  const std::string open = "<tool_call>", close = "</tool_call>\ntool\n", next = "\nassistant\n";
  const size_t call_at = output.find(open);
  const size_t close_at = output.find(close);
  if (call_at == std::string::npos || close_at == std::string::npos || close_at < call_at) return false;
  const size_t text_at = close_at + close.size();
  const size_t text_end = output.find(next, text_at);
  if (text_end == std::string::npos) return false;
  const auto json = nlohmann::json::parse(output.substr(call_at + open.size(), close_at - call_at - open.size()),
                                          nullptr, /*allow_exceptions=*/false);
  const nlohmann::json::json_pointer code("/arguments/code");
  if (json.contains(code) && json.at(code).is_string()) call.code = json.at(code).get<std::string>();
  call.tool_text = output.substr(text_at, text_end - text_at);
  return true;
}

// Runs rlcore and requires it to succeed; its output is shown only if it fails.
void run_rlcore_ok(const std::vector<std::string>& args) {
  const e2e::RunResult run = e2e::run_rlcore(args);
  INFO(run.output);
  REQUIRE(run.status == 0);
}

}  // namespace

TEST_CASE("GRPO trajectories call the python tool, which runs their code as nobody in its own PID namespace",
          "[e2e][agent]") {
  // As another user the sandbox runs the code as that user, and the output differs.
  if (::geteuid() != 0) FAIL("python_tool_e2e_test must run as root (it checks the drop to uid 65534)");
  const fs::path ws = fs::path(e2e::make_workspace("python_tool", 0));
  const std::string source = rlcore_test::source_dir();
  write_data(ws, 16);
  const std::string tools =
      "actor_rollout_ref.rollout.multi_turn.tool_config_path=" + source + "/configs/tools/python.yaml";
  // The whole conversation (a ~100-token call, the tool turn, the answer) fits the response.
  const std::string response_length = "data.max_response_length=160";

  // One-example steps with a decaying rate: many cheap updates are what makes the tiny model
  // copy the ~100-character call exactly (model seeds 1-3: 16 of 16 sampled calls right).
  run_rlcore_ok({"sft", "--config", source + "/configs/grpo_tool_arithmetic_sft.yaml", tools, response_length,
                 "trainer.default_local_dir=" + (ws / "sft").string(), "trainer.total_training_steps=150",
                 "trainer.test_freq=-1", "trainer.stop_at_val_reward=0", "data.train_batch_size=1",
                 "actor_rollout_ref.actor.optim.lr=0.003", "actor_rollout_ref.actor.optim.lr_scheduler_type=cosine",
                 "data.train_files=" + (ws / "sft.jsonl").string(), "data.val_files=" + (ws / "train.jsonl").string(),
                 "actor_rollout_ref.model.path=" + (ws / "model").string()});

  // 4 prompts x 4 samples, at temperature 0.5: sampled, but a typo in the program is rare.
  run_rlcore_ok({"--config", source + "/configs/grpo_tool_arithmetic.yaml", tools, response_length,
                 "trainer.default_local_dir=" + (ws / "grpo").string(), "trainer.total_training_steps=1",
                 "trainer.test_freq=-1", "trainer.save_freq=-1", "trainer.val_before_train=false",
                 "trainer.rollout_data_dir=" + (ws / "dump").string(), "data.train_batch_size=4",
                 "actor_rollout_ref.actor.ppo_mini_batch_size=4", "actor_rollout_ref.rollout.n=4",
                 "actor_rollout_ref.rollout.temperature=0.5", "reward.grader=tool_turn",
                 "data.train_files=" + (ws / "train.jsonl").string(), "data.val_files=" + (ws / "train.jsonl").string(),
                 "actor_rollout_ref.model.path=" + (ws / "sft/hf").string()});
  const auto metrics = e2e::read_metrics((ws / "grpo").string());
  REQUIRE(metrics.count(1) == 1);
  CHECK(metrics.at(1).at("agent/tool_call_rate") >= 0.9);   // 1.0 when measured
  CHECK(metrics.at(1).at("agent/tool_errors_mean") < 0.1);  // 0 when measured

  std::ifstream dump(ws / "dump/1.jsonl");
  int trajectories = 0, exact_calls = 0;
  for (std::string line; std::getline(dump, line); ++trajectories) {
    const std::string output = nlohmann::json::parse(line).at("output").get<std::string>();
    DumpedCall call;
    if (!parse_first_call(output, call) || call.code != kProgram) continue;
    INFO(output);
    CHECK(call.tool_text == kSandboxOutput);
    ++exact_calls;
  }
  CHECK(trajectories == 16);
  CHECK(exact_calls >= 0.9 * trajectories);  // 16 of 16 when measured
  fs::remove_all(ws);
}
