// PolicyLoss: the `policy_loss` extension point (verl's
// actor.policy_loss.loss_mode). Turns log-probs and advantages into the
// actor's scalar loss; the built-ins (vanilla, gspo, ...) are registered by the core.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <ATen/core/Tensor.h>

#include "rlcore/export.h"
#include "rlcore/rl_functional.h"

namespace rlcore {

struct PolicyLossInput {
  at::Tensor old_log_prob;        // [B, T] log-probs of the policy that sampled (no gradient)
  at::Tensor log_prob;            // [B, T] log-probs of the policy being trained (gradient flows here)
  at::Tensor advantages;          // [B, T]
  at::Tensor response_mask;       // [B, T] nonzero = response token
  at::Tensor rollout_is_weights;  // [B, T] optional rollout-correction weights, multiply the per-token loss
};

// The actor keys every loss may read (actor_rollout_ref.actor.*, verl's
// defaults) and the aggregation of the per-token loss, global counts included.
struct PolicyLossConfig {
  double clip_ratio = 0.2;
  std::optional<double> clip_ratio_low;   // unset: clip_ratio
  std::optional<double> clip_ratio_high;  // unset: clip_ratio
  double clip_ratio_c = 3.0;              // dual-clip bound for negative advantages; must be > 1
  LossAggregation aggregation;            // loss_agg_mode, dp_size, global token / sequence counts
  // SAPO's gate temperatures for positive and negative advantages (SDK 4.1: appended, so a
  // plugin built against 4.0 reads the fields before them unchanged).
  double tau_pos = 1.0;
  double tau_neg = 1.05;

  double low() const { return clip_ratio_low.value_or(clip_ratio); }
  double high() const { return clip_ratio_high.value_or(clip_ratio); }
};

struct PolicyLossOutput {
  at::Tensor loss;  // scalar, differentiable w.r.t. input.log_prob
  // Detached scalar tensors under verl's names (actor/pg_clipfrac, actor/ppo_kl,
  // actor/pg_clipfrac_lower); read them with .item() when logging so a device
  // backend is not synchronised per micro-batch.
  std::map<std::string, at::Tensor> metrics;
};

class RLCORE_API PolicyLoss {
 public:
  static constexpr const char* kKind = "policy_loss";

  virtual ~PolicyLoss();

  // Throws ValueError naming a missing or misshapen tensor or a bad config value.
  virtual PolicyLossOutput compute(const PolicyLossInput& input, const PolicyLossConfig& config) const = 0;
};

// Throws ValueError naming `loss` and the tensor or key at fault unless the
// four [B, T] tensors agree (and rollout_is_weights, when set) and the clip
// ratios are in range.
RLCORE_API void validate_policy_loss_input(const PolicyLossInput& input, const PolicyLossConfig& config,
                                           const std::string& loss);

}  // namespace rlcore
