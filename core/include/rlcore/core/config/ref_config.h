// actor_rollout_ref.ref: the frozen reference policy's log-prob passes. Keys
// the section does not declare are its train engine's (engine_options.h).
#pragma once

#include <cstdint>
#include <string>

#include "rlcore/config_node.h"
#include "rlcore/export.h"
#include "rlcore/options.h"

namespace rlcore::config {

struct RefConfig {
  std::string strategy = "fsdp";
  int64_t log_prob_micro_batch_size_per_gpu = 0;
  bool log_prob_use_dynamic_bsz = false;
  int64_t log_prob_max_token_len_per_gpu = 16384;
  ConfigNode engine_options;
};

RLCORE_API OptionsSchema<RefConfig> ref_schema();

}  // namespace rlcore::config
