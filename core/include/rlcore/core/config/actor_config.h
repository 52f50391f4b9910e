// actor_rollout_ref.actor: the policy's PPO update (verl's keys and defaults),
// its policy loss and routing replay. Keys the section does not declare are
// the actor's train engine's (engine_options, validated by the engine).
#pragma once

#include <cstdint>
#include <string>

#include "rlcore/config_node.h"
#include "rlcore/export.h"
#include "rlcore/options.h"

namespace rlcore::config {

// actor.router_replay (verl's): routing replay for a mixture of experts
// (docs/moe.md): disabled; R2 replays in the update the routing the
// old-log-prob pass chose; R3 replays the rollout's in both passes.
struct RouterReplayConfig {
  std::string mode = "disabled";  // disabled | R2 | R3
  bool replays() const { return mode != "disabled"; }
};

// actor.policy_loss: the loss's name and its own keys.
struct PolicyLossSection {
  std::string loss_mode = "vanilla";  // a registered policy_loss
  ConfigNode options;                 // every other key of the section
};

struct ActorConfig {
  std::string strategy = "fsdp";             // the train_engine to build
  int64_t ppo_mini_batch_size = 256;         // prompts per optimizer step (x rollout.n responses)
  int64_t ppo_micro_batch_size_per_gpu = 0;  // 0: a worker's whole mini-batch at once
  bool use_dynamic_bsz = false;
  int64_t ppo_max_token_len_per_gpu = 16384;
  int64_t ppo_epochs = 1;
  double clip_ratio = 0.2;
  double clip_ratio_low = 0.2;
  double clip_ratio_high = 0.2;
  double clip_ratio_c = 3.0;
  double tau_pos = 1.0;   // SAPO's gate temperature for positive advantages
  double tau_neg = 1.05;  // and for negative ones
  std::string loss_agg_mode = "token-mean";
  double entropy_coeff = 0.0;
  bool use_kl_loss = false;
  double kl_loss_coef = 0.001;
  std::string kl_loss_type = "low_var_kl";
  bool calculate_sum_pi_squared = false;  // old_log_prob also gives Σπ² per token (optimal token baseline)
  PolicyLossSection policy_loss;
  RouterReplayConfig router_replay;
  ConfigNode engine_options;  // the train engine's keys (optim, fsdp_config, grad_clip, ...)
};

RLCORE_API OptionsSchema<ActorConfig> actor_schema();

}  // namespace rlcore::config
