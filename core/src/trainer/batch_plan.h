// Private to the core: the numbers a run derives from its config (how the
// batch splits over workers and mini-batches, which roles run), checked once
// with errors that explain how the keys relate.
#pragma once

#include <cstdint>
#include <string>

#include "rlcore/advantage_estimator.h"
#include "rlcore/core/config/run_config.h"
#include "rlcore/registry.h"

namespace rlcore::trainer {

struct BatchPlan {
  int64_t prompts_per_step = 0;       // data.train_batch_size
  int64_t responses_per_step = 0;     // x rollout.n
  int64_t actor_workers = 1;          // the actor pool's dp size
  int64_t critic_workers = 0;         // 0: no critic
  int64_t actor_mini_batch_rows = 0;  // responses per actor optimizer step on one worker
  int64_t critic_mini_batch_rows = 0;
  int64_t actor_epochs = 1;   // actor.ppo_epochs
  int64_t critic_epochs = 1;  // critic.ppo_epochs, 0 there: the actor's
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;
  int64_t response_length = 0;  // data.max_response_length: the rollout's max_tokens
  bool use_ref = false;         // a KL term needs the reference policy
  AdvantageNeeds needs;         // of algorithm.adv_estimator
};

// `train_size`: examples in the training set; `actor_workers` / `critic_workers`:
// the sizes of the pools hosting those roles (critic_workers 0: no critic pool).
// Throws ConfigError naming every key involved when the sizes do not fit.
BatchPlan make_batch_plan(const config::RunConfig& config, const Registry& components, int64_t train_size,
                          int64_t actor_workers, int64_t critic_workers);

// Whether this config runs a critic (critic.enable, or auto: the estimator needs values).
bool uses_critic(const config::RunConfig& config, const Registry& components);

}  // namespace rlcore::trainer
