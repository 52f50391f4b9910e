// Shared pieces of the built-in algorithm files (core/src/algorithms/*.cc):
// one register function per file and the small tensor helpers they share.
#pragma once

#include <ATen/core/Tensor.h>

#include "rlcore/advantage_estimator.h"
#include "rlcore/policy_loss.h"
#include "rlcore/registry.h"

namespace rlcore::algorithms {

// verl clamps log(pi / pi_old) to +-20 before taking exp.
constexpr double kLogRatioClamp = 20.0;
// What the group-based estimators need from their input: the prompt index (uid) of each row.
constexpr AdvantageNeeds kNeedsIndex{false, /*index=*/true, false};

void register_return_estimators(PluginRegistrar& registrar);  // gae, reinforce_plus_plus, remax
void register_outcome_estimators(
    PluginRegistrar& registrar);  // grpo*, gdpo, rloo*, opo, gpg, reinforce_plus_plus_baseline
void register_optimal_token_baseline_estimators(PluginRegistrar& registrar);  // optimal_token_baseline, tir_*
void register_ppo_losses(PluginRegistrar& registrar);                         // vanilla, gspo, cispo, gpg, geo_mean
void register_cov_losses(PluginRegistrar& registrar);                         // clip_cov, kl_cov
void register_divergence_losses(PluginRegistrar& registrar);                  // dppo_tv, dppo_kl, sapo, dro

// `mask` as 0/1 in `like`'s dtype and on its device.
at::Tensor float_mask(const at::Tensor& mask, const at::Tensor& like);

// The policy losses' first steps (verl's compute_policy_loss_* preamble): the
// input checked for `loss_name`, the advantages in the log-probs' dtype, and
// log(pi / pi_old), clamped to +-kLogRatioClamp where verl clamps it, with its exp.
enum class LogRatio { kClamped, kUnclamped };
struct PolicyRatio {
  at::Tensor advantages;
  at::Tensor log_ratio;
  at::Tensor ratio;
};
PolicyRatio policy_ratio(const PolicyLossInput& input, const PolicyLossConfig& config, const char* loss_name,
                         LogRatio log_ratio);

// The policy losses' last steps: the per-token loss times the rollout-correction
// weights (when given), aggregated with `aggregation`; and the share of response
// tokens where `condition` holds, detached.
at::Tensor weighted_agg_loss(at::Tensor pg_losses, const PolicyLossInput& input, const LossAggregation& aggregation);
at::Tensor masked_fraction(const at::Tensor& condition, const at::Tensor& mask, const at::Tensor& like);

// Every verl outcome estimator returns the per-row scalar broadcast over the
// response: scalar[:, None] * mask, as both advantages and returns.
AdvantageOutput broadcast_outcome(const at::Tensor& row_scalar, const at::Tensor& mask);

}  // namespace rlcore::algorithms
