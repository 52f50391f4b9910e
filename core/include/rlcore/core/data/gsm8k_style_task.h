// A synthetic grade-school word-problem set in exactly verl's GSM8K parquet
// layout (examples/data_preprocess/gsm8k.py): two- and three-step problems with
// worked answers in GSM8K's style ("... <<48/2=24>>24 ...\n#### 72"), so a user
// can run the real `openai/gsm8k` grader, a chat template and parquet files end
// to end without the dataset. `rlcore data make --task gsm8k-style` writes it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rlcore/export.h"

namespace rlcore::data {

// data_source of every record: verl's GSM8K name, routed to the gsm8k grader.
inline constexpr const char* kGsm8kDataSource = "openai/gsm8k";
// What verl appends to each question.
inline constexpr const char* kGsm8kInstruction = "Let's think step by step and output the final answer after \"####\".";

struct Gsm8kStyleTaskOptions {
  int64_t train = 7473;  // GSM8K's split sizes
  int64_t test = 1319;
  int64_t seed = 1;
};

// A worked problem: `answer` is GSM8K's answer text, `solution` its final number.
struct Gsm8kStyleProblem {
  std::string question;
  std::string answer;
  int64_t solution = 0;
};

// verl's records: {"data_source": "openai/gsm8k", "prompt": [{"role": "user",
// "content": question + " " + kGsm8kInstruction}], "ability": "math",
// "reward_model": {"style": "rule", "ground_truth": "<solution>"}, "extra_info":
// {"split", "index", "answer", "question"}}. No test question is in train.
struct Gsm8kStyleTaskData {
  std::vector<nlohmann::json> train;
  std::vector<nlohmann::json> test;
};

// The columns of verl's GSM8K parquet files, in order.
RLCORE_API const std::vector<std::string>& gsm8k_columns();

// Deterministic in the options. Throws ValueError for negative counts or more
// test problems than the templates can make distinct.
RLCORE_API Gsm8kStyleTaskData make_gsm8k_style_task(const Gsm8kStyleTaskOptions& options);

struct Gsm8kStyleTaskFiles {
  std::string train;  // <dir>/train.parquet
  std::string test;   // <dir>/test.parquet
};

// Writes `data` as verl's two parquet files under `out_dir` (created when
// missing). Throws IoError naming the file or directory that cannot be written.
RLCORE_API Gsm8kStyleTaskFiles write_gsm8k_style_task(const Gsm8kStyleTaskData& data, const std::string& out_dir);

}  // namespace rlcore::data
