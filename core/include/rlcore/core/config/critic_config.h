// critic: the value model's PPO update (verl's keys). Keys the section does
// not declare are its train engine's (engine_options.h).
#pragma once

#include <cstdint>
#include <string>

#include "rlcore/config_node.h"
#include "rlcore/core/config/model_config.h"
#include "rlcore/export.h"
#include "rlcore/options.h"

namespace rlcore::config {

struct CriticConfig {
  std::string enable = "auto";  // auto (when the estimator needs values) | true | false
  std::string strategy = "fsdp";
  ModelPathConfig model;            // empty: the actor's model (trunk), fresh value head
  int64_t ppo_mini_batch_size = 0;  // 0: the actor's
  int64_t ppo_micro_batch_size_per_gpu = 0;
  int64_t forward_micro_batch_size_per_gpu = 0;
  bool use_dynamic_bsz = false;
  int64_t ppo_max_token_len_per_gpu = 32768;
  int64_t ppo_epochs = 0;  // 0: the actor's
  double cliprange_value = 0.5;
  std::string loss_agg_mode = "token-mean";
  ConfigNode engine_options;
};

RLCORE_API OptionsSchema<CriticConfig> critic_schema();

}  // namespace rlcore::config
