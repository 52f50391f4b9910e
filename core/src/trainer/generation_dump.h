// Private to the core: verl's trainer.rollout_data_dir and
// trainer.validation_data_dir, a step's responses with their scores as JSON
// lines, for reading what the policy generates.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include "rlcore/tokenizer/tokenizer.h"
#include "trainer/generation.h"
#include "trainer/rewards.h"

namespace rlcore::trainer {

// <dir>/<step>.jsonl: one line per response added, with verl's fields input
// (the prompt text), output (the response text), gts (the ground truth), score
// and step, and each reward extra of the row. `key` (the config key that asked
// for it) is named in IoErrors along with the file.
class GenerationDump {
 public:
  GenerationDump(const std::string& dir, int64_t step, std::string key);
  void add(const Rollout& rollout, const Rewards& rewards, const Tokenizer& tokenizer);
  void close();  // flushes; throws when anything failed to write

 private:
  std::string file_;
  int64_t step_;
  std::string key_;
  std::ofstream out_;
};

}  // namespace rlcore::trainer
