// Schema of actor_rollout_ref.actor (see actor_config.h).
#include "rlcore/core/config/actor_config.h"

#include "rlcore/rl_functional.h"

namespace rlcore::config {
namespace {

OptionsSchema<PolicyLossSection> policy_loss_schema() {
  OptionsSchema<PolicyLossSection> schema;
  schema
      .key("loss_mode", &PolicyLossSection::loss_mode,
           "Policy loss (a registered policy_loss, listed under allowed); its options live here too.")
      .other_keys_to(&PolicyLossSection::options);
  return schema;
}

OptionsSchema<RouterReplayConfig> router_replay_schema() {
  OptionsSchema<RouterReplayConfig> schema;
  schema.key("mode", &RouterReplayConfig::mode,
             "Routing replay of a mixture of experts (docs/moe.md): disabled; R2: the update replays the routing "
             "of the old-log-prob pass; R3: both passes replay the rollout's (needs "
             "rollout.enable_rollout_routing_replay). The train engine must have the routing_replay capability.",
             one_of({"disabled", "R2", "R3"}));
  return schema;
}

}  // namespace

OptionsSchema<ActorConfig> actor_schema() {
  OptionsSchema<ActorConfig> schema;
  schema.key("strategy", &ActorConfig::strategy, "Train engine of the actor (a registered train_engine, e.g. fsdp).")
      .key("ppo_mini_batch_size", &ActorConfig::ppo_mini_batch_size,
           "Prompts per optimizer step; each brings rollout.n responses. Must divide data.train_batch_size.",
           at_least(1))
      .key("ppo_micro_batch_size_per_gpu", &ActorConfig::ppo_micro_batch_size_per_gpu,
           "Responses per forward/backward on one worker (gradient accumulation); 0: the worker's whole mini-batch.",
           at_least(0))
      .key("use_dynamic_bsz", &ActorConfig::use_dynamic_bsz,
           "Pack micro-batches up to ppo_max_token_len_per_gpu tokens instead of a fixed row count.")
      .key("ppo_max_token_len_per_gpu", &ActorConfig::ppo_max_token_len_per_gpu,
           "Token budget of a micro-batch with use_dynamic_bsz.", at_least(1))
      .key("ppo_epochs", &ActorConfig::ppo_epochs, "Passes over each step's batch.", at_least(1))
      .key("clip_ratio", &ActorConfig::clip_ratio, "PPO clip range (both sides unless the next two are set).",
           greater_than(0))
      .key("clip_ratio_low", &ActorConfig::clip_ratio_low, "Lower clip range: ratio >= 1 - clip_ratio_low.",
           at_least(0))
      .key("clip_ratio_high", &ActorConfig::clip_ratio_high, "Upper clip range: ratio <= 1 + clip_ratio_high.",
           at_least(0))
      .key("clip_ratio_c", &ActorConfig::clip_ratio_c, "Dual-clip bound for negative advantages (> 1).",
           greater_than(1))
      .key("tau_pos", &ActorConfig::tau_pos, "SAPO's gate temperature for positive advantages.", greater_than(0))
      .key("tau_neg", &ActorConfig::tau_neg, "SAPO's gate temperature for negative advantages.", greater_than(0))
      .key("loss_agg_mode", &ActorConfig::loss_agg_mode, "How token losses become one number.",
           one_of(loss_agg_modes()))
      .key("entropy_coeff", &ActorConfig::entropy_coeff, "Entropy bonus coefficient (loss -= coeff * entropy).")
      .key("use_kl_loss", &ActorConfig::use_kl_loss, "Add kl_loss_coef * KL(actor || ref) to the loss (GRPO style).")
      .key("kl_loss_coef", &ActorConfig::kl_loss_coef, "Coefficient of the KL loss.", at_least(0))
      .key("kl_loss_type", &ActorConfig::kl_loss_type, "KL estimator of the KL loss.", one_of(kl_penalty_types()))
      .key("calculate_sum_pi_squared", &ActorConfig::calculate_sum_pi_squared,
           "The old-log-prob pass also computes sum_pi_squared (the sum over the vocabulary of each token's "
           "squared probability), which optimal_token_baseline and tir_optimal_token_baseline need and which "
           "adds the variance_proxy/ metrics; the train engine must have the sum_pi_squared capability.")
      .section("policy_loss", &ActorConfig::policy_loss, policy_loss_schema())
      .section("router_replay", &ActorConfig::router_replay, router_replay_schema())
      .other_keys_to(&ActorConfig::engine_options);
  return schema;
}

}  // namespace rlcore::config
