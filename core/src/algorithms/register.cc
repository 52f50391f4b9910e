// register_builtin_algorithms and the helpers the built-in algorithm files share.
#include <ATen/ATen.h>

#include "algorithms/internal.h"
#include "rlcore/core/algorithms/builtin_algorithms.h"

namespace rlcore::algorithms {

at::Tensor float_mask(const at::Tensor& mask, const at::Tensor& like) {
  return mask.to(like.device()).ne(0).to(like.scalar_type());
}

at::Tensor weighted_agg_loss(at::Tensor pg_losses, const PolicyLossInput& input, const LossAggregation& aggregation) {
  if (input.rollout_is_weights.defined()) {
    pg_losses = pg_losses * input.rollout_is_weights.to(pg_losses.device(), pg_losses.scalar_type());
  }
  return agg_loss(pg_losses, input.response_mask, aggregation);
}

PolicyRatio policy_ratio(const PolicyLossInput& input, const PolicyLossConfig& config, const char* loss_name,
                         LogRatio log_ratio) {
  validate_policy_loss_input(input, config, loss_name);
  PolicyRatio out;
  out.advantages = input.advantages.to(input.log_prob.scalar_type());
  out.log_ratio = input.log_prob - input.old_log_prob;
  if (log_ratio == LogRatio::kClamped) out.log_ratio = out.log_ratio.clamp(-kLogRatioClamp, kLogRatioClamp);
  out.ratio = at::exp(out.log_ratio);
  return out;
}

at::Tensor masked_fraction(const at::Tensor& condition, const at::Tensor& mask, const at::Tensor& like) {
  return masked_mean(condition.to(like.scalar_type()), mask).detach();
}

AdvantageOutput broadcast_outcome(const at::Tensor& row_scalar, const at::Tensor& mask) {
  at::Tensor advantages = row_scalar.unsqueeze(-1) * float_mask(mask, row_scalar);
  return {advantages, advantages.clone()};
}

void register_builtin_algorithms(Registry& registry) {
  PluginRegistrar registrar(registry, PluginOrigin{"core", RLCORE_VERSION_STRING, ""});
  register_return_estimators(registrar);
  register_outcome_estimators(registrar);
  register_optimal_token_baseline_estimators(registrar);
  register_ppo_losses(registrar);
  register_cov_losses(registrar);
  register_divergence_losses(registrar);
}

}  // namespace rlcore::algorithms
