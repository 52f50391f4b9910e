// Private to the core: the losses the trainer's worker roles hand to a
// TrainEngine's train_step (actor PPO loss, critic value loss, SFT loss).
#pragma once

#include <memory>
#include <string>

#include "rlcore/policy_loss.h"
#include "rlcore/train_engine.h"

namespace rlcore::workers {

struct ActorLossSettings {
  std::shared_ptr<const PolicyLoss> policy_loss;
  std::string policy_loss_name;
  PolicyLossConfig policy;  // clip ratios and loss_agg_mode; the counts are filled per call
  double entropy_coeff = 0.0;
  bool use_kl_loss = false;
  double kl_loss_coef = 0.0;
  std::string kl_loss_type = "low_var_kl";
};

// verl's actor loss: policy loss - entropy_coeff * entropy + kl_loss_coef * KL(actor || ref).
// metrics::Metrics (verl's names): actor/pg_loss, actor/pg_clipfrac, actor/ppo_kl,
// actor/pg_clipfrac_lower, actor/entropy (when computed), actor/kl_loss, actor/kl_coef.
LossFunction actor_loss(ActorLossSettings settings);

// verl's clipped value loss; metrics critic/vf_loss, critic/vf_clipfrac, critic/vpred_mean.
LossFunction critic_loss(double cliprange_value, std::string loss_agg_mode);

// Negative log-likelihood of the response tokens, token-mean over the global
// batch; metric sft/loss (the micro-batch's mean NLL).
LossFunction sft_loss();

}  // namespace rlcore::workers
