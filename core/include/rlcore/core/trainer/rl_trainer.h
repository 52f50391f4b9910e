// The single-controller RL trainer (verl's RayPPOTrainer.fit): this process
// owns the data, rewards and advantages; worker groups own the engines.
// One step: generate rollout.n responses per prompt -> grade -> old / ref
// log-probs and values -> advantages -> critic and actor updates -> weights
// to the rollout engine.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rlcore/core/config/run_config.h"
#include "rlcore/export.h"
#include "rlcore/registry.h"

namespace rlcore::trainer {

struct FitSummary {
  int64_t steps = 0;  // optimizer steps taken in total (including resumed ones)
  int64_t resumed_from = 0;
  std::map<std::string, double> first_validation;  // before training (val_before_train) or at the first test
  std::map<std::string, double> last_validation;
  std::string run_dir;
  std::string last_checkpoint;  // empty when none was saved
  std::string metrics_file;     // empty without the jsonl logger
  std::string preempted_by;     // "SIGTERM" / "SIGINT" when a signal stopped the run (runtime/preemption.h)
};

class RLCORE_API RlTrainer {
 public:
  // Validates how the batch sizes relate, loads the datasets and starts the
  // worker groups. Throws ConfigError naming the keys at fault.
  RlTrainer(const Registry& components, const config::ResolvedConfig& resolved,
            const std::vector<std::string>& plugin_paths, std::ostream& out);
  ~RlTrainer();
  RlTrainer(const RlTrainer&) = delete;
  RlTrainer& operator=(const RlTrainer&) = delete;

  // Trains to trainer.total_training_steps (or total_epochs), validating and
  // saving at the configured frequencies.
  FitSummary fit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlcore::trainer
