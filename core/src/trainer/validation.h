// Private to the core: validation by generation. Every validation prompt gets
// val_kwargs.n responses (greedy unless val_kwargs.do_sample), graded by the
// reward router; metrics val-core/<data_source>/reward/mean@n and
// val-aux/<data_source>/<extra>/mean@n; with trainer.validation_data_dir the
// responses too, as <dir>/<step>.jsonl. Used by the RL loop and by SFT.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rlcore/core/data/dataset.h"
#include "rlcore/core/trainer/reward_router.h"
#include "rlcore/core/config/run_config.h"
#include "rlcore/tokenizer/tokenizer.h"
#include "trainer/generation.h"
#include "trainer/rewards.h"
#include "trainer/step_metrics.h"

namespace rlcore::trainer {

class Validator {
 public:
  // Keeps references to `config`, `val_set` and `tokenizer`; `score` gives a rollout's rewards.
  Validator(const config::RunConfig& config, const data::Dataset& val_set, const Tokenizer& tokenizer,
            std::function<Rewards(const Rollout&)> score, GenerationLimits limits);

  bool enabled() const { return val_set_.size() > 0; }
  // The val-core names, one per data_source, in order of first appearance.
  const std::vector<std::string>& core_metric_names() const { return core_names_; }

  // Generates with the weights of version `version` (also the sampling seed's step).
  StepMetrics run(const RolloutWorkers& workers, int64_t version) const;

 private:
  const config::RunConfig& config_;
  const data::Dataset& val_set_;
  const Tokenizer& tokenizer_;
  std::function<Rewards(const Rollout&)> score_;
  GenerationLimits limits_;
  std::vector<std::string> core_names_;
};

// The mean of the val-core metrics in `metrics` (one per data_source); NaN when there are none.
double mean_val_core_reward(const StepMetrics& metrics);

// ConfigError when trainer.stop_at_val_reward is set but nothing validates
// (no data.val_files, or trainer.test_freq <= 0): the rule could never fire;
// and when trainer.val_only is set without data.val_files.
void check_stop_rule(const config::RunConfig& config);

// trainer.stop_at_val_reward: true when it is set and `validation` reaches it.
bool reached_stop_reward(const config::TrainerConfig& trainer, const StepMetrics& validation);

}  // namespace rlcore::trainer
