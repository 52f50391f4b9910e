// trainer: the run as a whole (names, run directory, loggers, steps,
// validation and checkpoint cadence, resume, device, the default pool's size).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rlcore/export.h"
#include "rlcore/options.h"

namespace rlcore::config {

struct TrainerConfig {
  std::string project_name = "rlcore";
  std::string experiment_name = "default";
  // Empty means runs/<project_name>/<experiment_name>.
  std::string default_local_dir;
  std::vector<std::string> logger = {"console"};
  std::string log_level = "info";
  int64_t total_epochs = 1;
  int64_t total_training_steps = 0;  // 0: total_epochs x steps per epoch
  int64_t test_freq = -1;            // validate every N steps (and at the end); -1: never
  int64_t save_freq = -1;            // checkpoint every N steps (and at the end); -1: never
  bool val_before_train = true;
  bool val_only = false;             // validate once, then stop without training
  double stop_at_val_reward = 0.0;   // stop after a validation whose val-core reward reaches it; 0: never
  bool balance_batch = true;         // reorder each batch so the actor's dp ranks get even work (verl's)
  std::string resume_mode = "auto";  // auto | disable | resume_path
  std::string resume_from_path;      // resume_path: a global_step_N checkpoint directory
  int64_t max_ckpt_to_keep = 0;      // 0: keep all
  std::string rollout_data_dir;      // "": off; else each step's responses as <dir>/<step>.jsonl
  std::string validation_data_dir;   // "": off; else each validation's responses as <dir>/<step>.jsonl
  std::string device = "auto";       // auto | cpu | cuda: each worker binds cuda:<its local rank>
  // On the first SIGTERM or SIGINT: checkpoint (finish the step, save, exit 75) or exit (at once, 75).
  std::string on_preempt = "checkpoint";
  double preempt_grace_s = 30.0;  // the checkpoint's deadline after the signal
  // With rollout.exact_logprobs: end the run at the first token whose rollout and trainer log-probs differ.
  bool check_exact_logprobs = false;
  // The default pool's size, verl's names for runtime.nnodes / runtime.n_workers_per_node:
  // resolve_config makes each pair equal (one set: it wins; both set and different: an error).
  int64_t nnodes = 1;
  int64_t n_gpus_per_node = 1;
};

RLCORE_API OptionsSchema<TrainerConfig> trainer_schema();

}  // namespace rlcore::config
