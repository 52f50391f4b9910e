// Rollout correction's importance weights (verl's compute_rollout_correction_weights
// and compute_is_metrics), its off-policy diagnostics (compute_offpolicy_metrics)
// and the step that combines them with rejection (rollout_rejection.cc).
#include "rlcore/rollout_correction.h"

#include <ATen/ATen.h>

#include <limits>

#include "rlcore/error.h"
#include "rlcore/rl_functional.h"
#include "rollout_correction_internal.h"

namespace rlcore {
namespace {

using rollout_correction_internal::IsThreshold;
using rollout_correction_internal::kSafetyBound;
using rollout_correction_internal::unbiased_std_or_zero;

using Metrics = std::map<std::string, double>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kGuardEpsilon = 1e-8;  // verl's guards in the ESS and the batch normalization

double value_of(const at::Tensor& scalar) { return scalar.item<double>(); }

// A Python float made a tensor as verl does (torch.tensor(x): the default float32).
at::Tensor float32_scalar(double value, const at::Tensor& like) {
  return at::scalar_tensor(value, like.options().dtype(at::kFloat));
}

struct IsWeights {
  at::Tensor weights;                // after TIS / IcePop
  at::Tensor raw;                    // exp(clamped log-ratio), zero on padding
  at::Tensor log_ratio_for_metrics;  // [B, T] (token) or per-sequence sums [B, 1]
};

IsWeights importance_weights(const at::Tensor& log_ratio, const at::Tensor& mask, bool sequence_level,
                             const IsThreshold& threshold) {
  IsWeights is;
  if (sequence_level) {
    is.log_ratio_for_metrics = masked_sum(log_ratio, mask, -1).unsqueeze(-1);
    is.raw = at::exp(at::clamp(is.log_ratio_for_metrics, -kSafetyBound, kSafetyBound)).expand_as(log_ratio);
  } else {
    is.log_ratio_for_metrics = log_ratio;
    is.raw = at::exp(at::clamp(log_ratio, -kSafetyBound, kSafetyBound));
  }
  is.raw = is.raw * mask;
  if (!threshold.lower) {
    is.weights = at::clamp_max(is.raw, threshold.upper);
  } else {
    const at::Tensor kept = is.raw.ge(*threshold.lower).logical_and(is.raw.le(threshold.upper));
    is.weights = at::where(kept, is.raw, at::zeros_like(is.raw));
  }
  return is;
}

// verl's compute_is_metrics (plus rollout_is_oob_ratio for IcePop).
Metrics is_metrics(const IsWeights& is, const at::Tensor& mask, bool sequence_level, const IsThreshold& threshold) {
  Metrics metrics;
  const double upper = threshold.upper;
  const double lower = threshold.lower ? *threshold.lower : 1.0 / upper;
  const at::Tensor& weights = is.weights;
  metrics["rollout_is_mean"] = value_of(masked_mean(weights, mask));
  if (sequence_level) {
    const at::Tensor& log_sums = is.log_ratio_for_metrics;
    metrics["rollout_is_max"] = value_of(at::exp(at::clamp_max(log_sums.max(), kSafetyBound)));
    metrics["rollout_is_min"] = value_of(at::exp(log_sums.min()));
    // Compared in log space against float32 logs of the bounds, as verl does.
    const at::Tensor log_upper = at::log(float32_scalar(upper, log_sums));
    const at::Tensor log_lower = at::log(float32_scalar(lower, log_sums));
    metrics["rollout_is_ratio_fraction_high"] = value_of(log_sums.gt(log_upper).to(at::kFloat).mean());
    metrics["rollout_is_ratio_fraction_low"] = value_of(log_sums.lt(log_lower).to(at::kFloat).mean());
  } else {
    metrics["rollout_is_ratio_fraction_high"] = value_of(masked_mean(is.raw.gt(upper).to(at::kFloat), mask));
    metrics["rollout_is_ratio_fraction_low"] = value_of(masked_mean(is.raw.lt(lower).to(at::kFloat), mask));
    const at::Tensor padding = mask.eq(0);
    metrics["rollout_is_max"] = value_of(weights.masked_fill(padding, -kInf).max());
    metrics["rollout_is_min"] = value_of(weights.masked_fill(padding, kInf).min());
  }

  // Std and ESS of the applied weights, so IcePop's zeros count.
  const at::Tensor clamped = weights.clamp(0.0, upper);
  const at::Tensor clamped_mean = masked_mean(clamped, mask);
  if (value_of(mask.sum()) > 1) {
    const at::Tensor variance = masked_mean(clamped.square(), mask) - clamped_mean.square();
    metrics["rollout_is_std"] = value_of(at::sqrt(at::clamp_min(variance, 0.0)));
  } else {
    metrics["rollout_is_std"] = 0.0;
  }
  const double normalized_square_mean =
      value_of(masked_mean((clamped / (clamped_mean + kGuardEpsilon)).square(), mask));
  // Every weight zero (IcePop rejected all): no effective sample. verl divides by zero here.
  metrics["rollout_is_eff_sample_size"] = normalized_square_mean == 0 ? 0.0 : 1.0 / normalized_square_mean;

  const at::Tensor seq_means = masked_mean(weights, mask, -1);
  metrics["rollout_is_seq_mean"] = value_of(seq_means.mean());
  metrics["rollout_is_seq_std"] = unbiased_std_or_zero(seq_means);
  metrics["rollout_is_seq_max"] = value_of(seq_means.max());
  metrics["rollout_is_seq_min"] = value_of(seq_means.min());
  metrics["rollout_is_seq_max_deviation"] = value_of((seq_means - 1.0).abs().max());
  // The raw weights' row means: a mean of truncated weights never exceeds the bound.
  const at::Tensor raw_seq_means = masked_mean(is.raw, mask, -1);
  metrics["rollout_is_seq_fraction_high"] = value_of(raw_seq_means.gt(upper).to(at::kFloat).mean());
  metrics["rollout_is_seq_fraction_low"] = value_of(raw_seq_means.lt(lower).to(at::kFloat).mean());
  if (threshold.lower) {
    const at::Tensor outside = is.raw.lt(*threshold.lower).logical_or(is.raw.gt(upper));
    metrics["rollout_is_oob_ratio"] = value_of(masked_mean(outside.to(at::kFloat), mask));
  }
  return metrics;
}

// Divides the weights by their batch mean (over tokens, or over sequences
// with a valid token); verl's non-distributed branch.
at::Tensor batch_normalize(const at::Tensor& weights, const at::Tensor& mask, bool sequence_level, Metrics& metrics) {
  at::Tensor mean;
  if (sequence_level) {
    const at::Tensor seq_weights = masked_mean(weights, mask, -1);
    const at::Tensor seq_mask = mask.sum(-1).gt(0).to(weights.scalar_type());
    mean = (seq_weights * seq_mask).sum() / seq_mask.sum().clamp_min(kGuardEpsilon);
  } else {
    mean = masked_mean(weights, mask);
  }
  if (!mean.gt(kGuardEpsilon).item<bool>()) {
    metrics["rollout_is_batch_norm_factor"] = 1.0;
    return weights;
  }
  metrics["rollout_is_batch_norm_factor"] = value_of(mean);
  return weights / mean;
}

// The off-policy diagnostics, unprefixed (verl's compute_offpolicy_metrics).
Metrics offpolicy_metrics(const at::Tensor& old_log_prob, const at::Tensor& rollout_log_prob, const at::Tensor& mask) {
  Metrics metrics;
  const at::Tensor training_mean = masked_mean(old_log_prob, mask, -1);
  metrics["training_ppl"] = value_of(at::exp(-training_mean).mean());
  metrics["training_log_ppl"] = value_of((-training_mean).mean());

  metrics["kl"] = value_of(masked_mean(rollout_log_prob - old_log_prob, mask));
  const at::Tensor log_ratio = old_log_prob - rollout_log_prob;
  metrics["k3_kl"] = value_of(masked_mean(at::exp(log_ratio) - log_ratio - 1, mask));

  const at::Tensor rollout_mean = masked_mean(rollout_log_prob, mask, -1);
  metrics["rollout_ppl"] = value_of(at::exp(-rollout_mean).mean());
  metrics["rollout_log_ppl"] = value_of((-rollout_mean).mean());

  const at::Tensor log_ppl_diff = rollout_mean - training_mean;
  metrics["log_ppl_diff"] = value_of(log_ppl_diff.mean());
  metrics["log_ppl_abs_diff"] = value_of(log_ppl_diff.abs().mean());
  metrics["log_ppl_diff_max"] = value_of(log_ppl_diff.max());
  metrics["log_ppl_diff_min"] = value_of(log_ppl_diff.min());
  metrics["ppl_ratio"] = value_of(at::exp(log_ppl_diff).mean());

  const at::Tensor rho = at::exp(at::clamp(log_ratio, -kSafetyBound, kSafetyBound));
  metrics["chi2_token"] = value_of(masked_mean(rho.square(), mask) - 1.0);
  const at::Tensor log_ratio_sum = at::clamp(masked_sum(log_ratio, mask, -1), -kSafetyBound, kSafetyBound);
  metrics["chi2_seq"] = value_of(at::exp(2.0 * log_ratio_sum).mean() - 1.0);
  return metrics;
}

// Shapes as verl requires them, and at least one valid token (verl raises on an empty mask).
void check_inputs(const at::Tensor& old_log_prob, const at::Tensor& rollout_log_prob, const at::Tensor& mask) {
  require_float_matrix(old_log_prob, "old_log_prob");
  require_float_matrix(rollout_log_prob, "rollout_log_prob");
  require_shape(rollout_log_prob, old_log_prob.sizes(), "rollout_log_prob");
  require_shape(mask, old_log_prob.sizes(), "response_mask");
  if (!mask.ne(0).any().item<bool>()) {
    throw ValueError("rollout correction: response_mask must contain at least one valid token (1)");
  }
}

void add_prefixed(const Metrics& metrics, Metrics& into) {
  for (const auto& [key, value] : metrics) into["rollout_corr/" + key] = value;
}

}  // namespace

std::map<std::string, double> compute_offpolicy_metrics(const at::Tensor& log_prob, const at::Tensor& rollout_log_prob,
                                                        const at::Tensor& response_mask) {
  const at::Tensor mask = response_mask.detach().to(log_prob.device());
  check_inputs(log_prob, rollout_log_prob, mask);
  Metrics metrics;
  add_prefixed(offpolicy_metrics(log_prob.detach(), rollout_log_prob.detach(), mask), metrics);
  return metrics;
}

RolloutCorrectionResult compute_rollout_correction(const at::Tensor& old_log_prob, const at::Tensor& rollout_log_prob,
                                                   const at::Tensor& response_mask,
                                                   const RolloutCorrectionConfig& config) {
  const auto parsed = rollout_correction_internal::parse_config(config, "algorithm.rollout_correction");
  const at::Tensor mask = response_mask.detach().to(old_log_prob.device());
  check_inputs(old_log_prob, rollout_log_prob, mask);
  const at::Tensor old_lp = old_log_prob.detach();
  const at::Tensor rollout_lp = rollout_log_prob.detach();
  const at::Tensor log_ratio = old_lp - rollout_lp;

  RolloutCorrectionResult result;
  Metrics metrics;
  if (parsed.is_level) {
    const bool sequence_level = *parsed.is_level == "sequence";
    const IsWeights is = importance_weights(log_ratio, mask, sequence_level, parsed.is_threshold);
    metrics = is_metrics(is, mask, sequence_level, parsed.is_threshold);
    result.rollout_is_weights =
        parsed.is_batch_normalize ? batch_normalize(is.weights, mask, sequence_level, metrics) : is.weights;
  }
  if (parsed.rejection.empty()) {
    result.response_mask = mask.clone();
  } else {
    auto rejection = rollout_correction_internal::compute_rejection_mask(log_ratio, mask, parsed.rejection);
    result.response_mask = std::move(rejection.response_mask);
    metrics.insert(rejection.metrics.begin(), rejection.metrics.end());
  }
  const Metrics offpolicy = offpolicy_metrics(old_lp, rollout_lp, mask);
  metrics.insert(offpolicy.begin(), offpolicy.end());
  add_prefixed(metrics, result.metrics);
  return result;
}

}  // namespace rlcore
