// Supervised fine-tuning through the same worker roles and train engines as
// RL: loss on response tokens only, then an HF checkpoint the RL config can
// start from (actor_rollout_ref.model.path).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "rlcore/core/run_config.h"
#include "rlcore/export.h"

namespace rlcore {

struct SftSummary {
  int64_t steps = 0;
  double first_loss = 0.0;
  double last_loss = 0.0;
  std::string model_dir;  // the exported HF checkpoint: <run_dir>/hf
};

// Reads data.train_files with data.response_key, trains the actor's engine
// for trainer.total_training_steps (or total_epochs) steps of
// data.train_batch_size examples, and exports <run_dir>/hf.
RLCORE_API SftSummary run_sft(const ResolvedConfig& resolved, const std::vector<std::string>& plugin_paths,
                              std::ostream& out);

}  // namespace rlcore
