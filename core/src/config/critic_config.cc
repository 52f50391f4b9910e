// Schema of critic (see critic_config.h).
#include "rlcore/core/config/critic_config.h"

#include "rlcore/rl_functional.h"

namespace rlcore::config {

OptionsSchema<CriticConfig> critic_schema() {
  OptionsSchema<CriticConfig> schema;
  schema
      .key("enable", &CriticConfig::enable, "Run a critic: auto (when the estimator needs values), true, false.",
           one_of({"auto", "true", "false"}))
      .key("strategy", &CriticConfig::strategy, "Train engine of the critic.")
      .section("model", &CriticConfig::model,
               model_path_schema("Critic checkpoint; empty: the actor's model with a fresh value head."))
      .key("ppo_mini_batch_size", &CriticConfig::ppo_mini_batch_size, "Prompts per critic step; 0: the actor's.",
           at_least(0))
      .key("ppo_micro_batch_size_per_gpu", &CriticConfig::ppo_micro_batch_size_per_gpu,
           "Responses per forward/backward on one worker; 0: all at once.", at_least(0))
      .key("forward_micro_batch_size_per_gpu", &CriticConfig::forward_micro_batch_size_per_gpu,
           "Responses per value forward on one worker; 0: all at once.", at_least(0))
      .key("use_dynamic_bsz", &CriticConfig::use_dynamic_bsz, "Token-budget micro-batches.")
      .key("ppo_max_token_len_per_gpu", &CriticConfig::ppo_max_token_len_per_gpu, "Token budget with use_dynamic_bsz.",
           at_least(1))
      .key("ppo_epochs", &CriticConfig::ppo_epochs, "Passes over each batch; 0: the actor's.", at_least(0))
      .key("cliprange_value", &CriticConfig::cliprange_value, "Value clipping range.", greater_than(0))
      .key("loss_agg_mode", &CriticConfig::loss_agg_mode, "Aggregation of the value loss.", one_of(loss_agg_modes()))
      .other_keys_to(&CriticConfig::engine_options);
  return schema;
}

}  // namespace rlcore::config
