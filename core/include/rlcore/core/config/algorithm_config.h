// algorithm: the advantage estimator and its keys, the KL penalty in the
// reward, DAPO's dynamic sampling and the rollout correction (verl's keys).
#pragma once

#include <cstdint>
#include <string>

#include "rlcore/config_node.h"
#include "rlcore/export.h"
#include "rlcore/kl_controller.h"
#include "rlcore/options.h"
#include "rlcore/rollout_correction.h"

namespace rlcore::config {

// DAPO's dynamic sampling (verl's algorithm.filter_groups): generate more
// batches until data.train_batch_size prompts have groups whose responses
// differ on `metric`.
struct FilterGroupsConfig {
  bool enable = false;
  std::string metric = "reward";    // "reward": the score; else a grader extra ("acc", ...)
  int64_t max_num_gen_batches = 0;  // generation batches per step at most; <= 0: no limit
};

// verl's algorithm.rollout_correction: the SDK's settings (see
// rlcore/rollout_correction.h) plus verl's bypass mode, which rlcore refuses.
struct RolloutCorrectionSection {
  std::string rollout_is;  // "" (off), token, sequence
  std::string rollout_is_threshold = "2.0";
  bool rollout_is_batch_normalize = false;
  std::string rollout_rs;  // "" (off) or comma-separated options
  std::string rollout_rs_threshold;
  bool bypass_mode = false;
  std::string loss_type = "ppo_clip";  // bypass_mode's loss

  RolloutCorrectionConfig settings() const {
    return {rollout_is, rollout_is_threshold, rollout_is_batch_normalize, rollout_rs, rollout_rs_threshold};
  }
};

struct AlgorithmConfig {
  std::string adv_estimator = "gae";
  bool use_kl_in_reward = false;
  std::string kl_penalty = "kl";
  KlControlConfig kl_ctrl;
  FilterGroupsConfig filter_groups;
  RolloutCorrectionSection rollout_correction;
  ConfigNode estimator_options;  // the advantage estimator's keys (gamma, lam, ...)
};

RLCORE_API OptionsSchema<AlgorithmConfig> algorithm_schema();

// What the section's keys cannot say alone: rollout correction settings verl
// would refuse mid-run. Throws ConfigError naming the key.
RLCORE_API void validate(const AlgorithmConfig& config);

}  // namespace rlcore::config
