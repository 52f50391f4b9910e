// Schema of actor_rollout_ref.ref (see ref_config.h).
#include "rlcore/core/config/ref_config.h"

namespace rlcore::config {

OptionsSchema<RefConfig> ref_schema() {
  OptionsSchema<RefConfig> schema;
  schema.key("strategy", &RefConfig::strategy, "Train engine of the frozen reference policy.")
      .key("log_prob_micro_batch_size_per_gpu", &RefConfig::log_prob_micro_batch_size_per_gpu,
           "Responses per forward on one worker; 0: all at once.", at_least(0))
      .key("log_prob_use_dynamic_bsz", &RefConfig::log_prob_use_dynamic_bsz, "Token-budget micro-batches.")
      .key("log_prob_max_token_len_per_gpu", &RefConfig::log_prob_max_token_len_per_gpu,
           "Token budget with log_prob_use_dynamic_bsz.", at_least(1))
      .other_keys_to(&RefConfig::engine_options);
  return schema;
}

}  // namespace rlcore::config
