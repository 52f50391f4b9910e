// Private to the core: verl's trainer.rollout_data_dir, each step's responses
// with their scores as JSON lines, for reading what the policy generates.
#pragma once

#include <cstdint>
#include <string>

#include "rlcore/tokenizer.h"
#include "trainer/generation.h"
#include "trainer/rewards.h"

namespace rlcore::trainer {

// Writes <dir>/<step>.jsonl: one line per row of `rollout`, with verl's fields
// input (the prompt text), output (the response text), gts (the ground truth),
// score and step, and each reward extra of the row. Throws IoError naming the file.
void dump_generations(const std::string& dir, int64_t step, const Rollout& rollout, const Rewards& rewards,
                      const Tokenizer& tokenizer);

}  // namespace rlcore::trainer
