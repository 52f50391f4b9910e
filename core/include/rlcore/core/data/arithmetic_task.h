// rlcore's built-in task with a verifiable answer: "12+35=" -> "#### 47", small
// enough for a tiny model to learn from scratch, scored by the `arithmetic` grader.
// `rlcore data make --task arithmetic` writes it as RL and SFT datasets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/export.h"

namespace rlcore::data {

// data_source of every record (the reward plugin's `arithmetic` grader handles it).
inline constexpr const char* kArithmeticDataSource = "arithmetic";

struct ArithmeticTaskOptions {
  int64_t train = 20000;  // training records (drawn with replacement: may repeat)
  int64_t val = 500;      // validation records (distinct, none in train)
  int digits = 2;         // operands have exactly this many digits (1: 0-9), 1 to 9
  int64_t seed = 1;
  std::vector<std::string> ops = {"+"};  // any of + - *
  // The tool-use variant (`--task arithmetic-tool`, docs/agent-loop.md): records
  // in verl's agent layout (agent_name "tool_agent", extra_info.tools_kwargs
  // for the calculator); this share of the SFT records demonstrates a call of
  // the calculator, the others answer directly.
  bool tools = false;
  double sft_tool_share = 0.5;
};

// The name of the tool the arithmetic-tool records call (the `tools` plugin's calculator).
inline constexpr const char* kArithmeticToolName = "calculator";

struct ArithmeticProblem {
  int64_t a = 0;
  int64_t b = 0;
  char op = '+';

  int64_t answer() const;
  std::string prompt() const;    // "12+35="
  std::string response() const;  // "#### 47": what the grader reads
  // The tool-use demonstration: the assistant's Hermes-style calculator call,
  // the tool's result, the assistant's answer (chat messages).
  nlohmann::json tool_demonstration() const;
};

// verl-style RL records: {"data_source", "prompt": [{"role": "user", "content"}],
// "ability", "reward_model": {"style": "rule", "ground_truth"}, "extra_info"}.
// SFT records are the training records plus "response".
struct ArithmeticTaskData {
  std::vector<nlohmann::json> train;
  std::vector<nlohmann::json> val;
  std::vector<nlohmann::json> sft;
};

// Deterministic in the options. Throws ValueError for bad options (digits outside
// 1-9, an unknown op, negative counts, or a val set that would leave less than half
// of the possible problems for training).
RLCORE_API ArithmeticTaskData make_arithmetic_task(const ArithmeticTaskOptions& options);

struct ArithmeticTaskFiles {
  std::string train;  // <dir>/train.jsonl
  std::string val;    // <dir>/val.jsonl
  std::string sft;    // <dir>/sft.jsonl
};

// Writes `data` (from make_arithmetic_task) under `out_dir` (created when missing).
// Throws IoError naming the file or directory that cannot be written.
RLCORE_API ArithmeticTaskFiles write_arithmetic_task(const ArithmeticTaskData& data, const std::string& out_dir);

}  // namespace rlcore::data
