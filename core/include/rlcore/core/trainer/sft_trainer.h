// Supervised fine-tuning through the same worker roles and train engines as
// RL: loss on response tokens only, then an HF checkpoint the RL config can
// start from (actor_rollout_ref.model.path).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "rlcore/core/config/run_config.h"
#include "rlcore/export.h"
#include "rlcore/registry.h"

namespace rlcore::trainer {

struct SftSummary {
  int64_t steps = 0;
  double first_loss = 0.0;
  double last_loss = 0.0;
  std::map<std::string, double> last_validation;  // empty without data.val_files
  bool stopped_at_val_reward = false;             // trainer.stop_at_val_reward was reached
  std::string model_dir;                          // the exported HF checkpoint: <run_dir>/hf
};

// Reads data.train_files with data.response_key and trains the actor's engine
// for trainer.total_training_steps (or total_epochs) steps of
// data.train_batch_size examples, then exports <run_dir>/hf. With
// data.val_files, validates by generation like the RL trainer (test_freq,
// val_before_train, graded by the reward plugins in `components`) and stops
// early once trainer.stop_at_val_reward is reached.
RLCORE_API SftSummary run_sft(const Registry& components, const config::ResolvedConfig& resolved,
                              const std::vector<std::string>& plugin_paths, std::ostream& out);

}  // namespace rlcore::trainer
