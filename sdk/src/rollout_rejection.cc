// Rejection sampling of rollout correction (verl's compute_rollout_rejection_mask
// and compute_rs_metrics): tokens or whole sequences whose divergence between
// trainer and rollout log-probs is out of bounds leave the response mask.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "rlcore/rl_functional.h"
#include "rollout_correction_internal.h"

namespace rlcore::rollout_correction_internal {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool is_k1(const std::string& name) { return name.compare(name.size() - 2, 2, "k1") == 0; }
bool has_prefix(const std::string& name, const char* prefix) { return name.rfind(prefix, 0) == 0; }

double value_of(const at::Tensor& scalar) { return scalar.item<double>(); }

// The per-token divergence estimators of log(pi_train / pi_rollout), clamped to +-20.
struct TokenDivergences {
  at::Tensor k1, k2, k3;
  const at::Tensor& of(const std::string& name) const {
    const char last = name.back();
    return last == '1' ? k1 : last == '2' ? k2 : k3;
  }
};

TokenDivergences token_divergences(const at::Tensor& log_ratio) {
  const at::Tensor safe = at::clamp(log_ratio, -kSafetyBound, kSafetyBound);
  return {-safe, 0.5 * safe.pow(2), at::exp(safe) - 1.0 - safe};
}

// Row maximum over the mask; 0 for a row with no valid token.
at::Tensor sequence_max(const at::Tensor& values, const at::Tensor& mask_bool) {
  const at::Tensor max_values = values.masked_fill(mask_bool.logical_not(), -kInf).amax(-1);
  return at::where(max_values.eq(-kInf), at::zeros_like(max_values), max_values);
}

// One option's statistic and verdict.
struct OptionVerdict {
  at::Tensor per_token_stat;     // [B, T]; a sequence option's statistic repeated along T
  at::Tensor per_sequence_stat;  // [B]; undefined for token options
  at::Tensor token_keep;         // [B, T] bool
};

OptionVerdict judge(const RejectionOption& option, const TokenDivergences& divergences, const at::Tensor& mask,
                    const at::Tensor& mask_bool) {
  const at::Tensor& token_stat = divergences.of(option.name);
  auto within = [&](const at::Tensor& stat) {
    if (!is_k1(option.name)) return stat.le(option.upper);
    return stat.ge(std::log(*option.lower)).logical_and(stat.le(std::log(option.upper)));
  };
  OptionVerdict verdict;
  if (has_prefix(option.name, "token_")) {
    verdict.per_token_stat = token_stat;
    verdict.token_keep = within(token_stat);
    return verdict;
  }
  at::Tensor seq_stat;
  if (has_prefix(option.name, "seq_sum_")) {
    seq_stat = masked_sum(token_stat, mask, -1);
  } else if (has_prefix(option.name, "seq_mean_")) {
    seq_stat = masked_mean(token_stat, mask, -1);
  } else {
    seq_stat = sequence_max(token_stat, mask_bool);
  }
  verdict.per_sequence_stat = seq_stat;
  verdict.token_keep = within(seq_stat).unsqueeze(-1).expand_as(mask_bool);
  verdict.per_token_stat = seq_stat.unsqueeze(-1).expand_as(mask);
  return verdict;
}

// verl's compute_rs_metrics for one option: `upper`/`lower` are the bounds the
// statistic is compared with (logs of the ratio bounds for k1 options).
void add_option_metrics(const RejectionOption& option, const OptionVerdict& verdict, const at::Tensor& mask,
                        const at::Tensor& mask_bool, const at::Tensor& seq_valid,
                        std::map<std::string, double>& metrics) {
  const std::string prefix = "rollout_rs_" + option.name;
  const bool apply_lower = is_k1(option.name);
  const double upper = apply_lower ? std::log(option.upper) : option.upper;
  const double lower = apply_lower ? std::log(*option.lower) : 0.0;
  const bool sequence_level = verdict.per_sequence_stat.defined();
  const at::Tensor& stat = verdict.per_token_stat;
  const at::Tensor seq_values = sequence_level ? verdict.per_sequence_stat : masked_mean(stat, mask, -1);
  // Never empty: the caller has checked that some row has a valid token.
  const at::Tensor seq_valid_values = seq_values.masked_select(seq_valid);

  metrics[prefix + "_mean"] = value_of(masked_mean(stat, mask));
  if (sequence_level) {
    metrics[prefix + "_max"] = value_of(seq_valid_values.max());
    metrics[prefix + "_min"] = value_of(seq_valid_values.min());
    metrics[prefix + "_fraction_high"] = value_of(seq_valid_values.gt(upper).to(at::kFloat).mean());
    metrics[prefix + "_fraction_low"] = apply_lower ? value_of(seq_valid_values.lt(lower).to(at::kFloat).mean()) : 0.0;
  } else {
    metrics[prefix + "_max"] = value_of(stat.masked_fill(mask_bool.logical_not(), -kInf).max());
    metrics[prefix + "_min"] = value_of(stat.masked_fill(mask_bool.logical_not(), kInf).min());
    metrics[prefix + "_fraction_high"] = value_of(masked_mean(stat.gt(upper).to(at::kFloat), mask));
    metrics[prefix + "_fraction_low"] = apply_lower ? value_of(masked_mean(stat.lt(lower).to(at::kFloat), mask)) : 0.0;
  }

  if (value_of(mask.sum()) > 1) {
    const at::Tensor clamped = stat.clamp(apply_lower ? lower : 0.0, upper);
    const at::Tensor mean = masked_mean(clamped, mask);
    const at::Tensor variance = masked_mean(clamped.square(), mask) - mean.square();
    metrics[prefix + "_std"] = value_of(at::sqrt(at::clamp_min(variance, 0.0)));
  } else {
    metrics[prefix + "_std"] = 0.0;
  }

  metrics[prefix + "_seq_mean"] = value_of(seq_valid_values.mean());
  metrics[prefix + "_seq_std"] = unbiased_std_or_zero(seq_valid_values);
  metrics[prefix + "_seq_max"] = value_of(seq_valid_values.max());
  metrics[prefix + "_seq_min"] = value_of(seq_valid_values.min());
  metrics[prefix + "_seq_max_deviation"] = value_of((seq_valid_values - 0.0).abs().max());
  metrics[prefix + "_seq_fraction_high"] = value_of(seq_valid_values.gt(upper).to(at::kFloat).mean());
  if (apply_lower) metrics[prefix + "_seq_fraction_low"] = value_of(seq_valid_values.lt(lower).to(at::kFloat).mean());
}

}  // namespace

double unbiased_std_or_zero(const at::Tensor& values) { return values.numel() > 1 ? values.std().item<double>() : 0.0; }

RejectionResult compute_rejection_mask(const at::Tensor& log_ratio, const at::Tensor& response_mask,
                                       const std::vector<RejectionOption>& options) {
  const TokenDivergences divergences = token_divergences(log_ratio);
  const at::Tensor mask_bool = response_mask.ne(0);
  const at::Tensor seq_valid = response_mask.sum(-1).gt(0);
  const at::Tensor seq_valid_float = seq_valid.to(at::kFloat);
  at::Tensor combined = at::ones_like(response_mask, log_ratio.options());
  RejectionResult result;
  std::map<std::string, double>& metrics = result.metrics;

  for (const RejectionOption& option : options) {
    const OptionVerdict verdict = judge(option, divergences, response_mask, mask_bool);
    const at::Tensor keep = verdict.token_keep.to(log_ratio.scalar_type());
    combined = combined * keep;
    add_option_metrics(option, verdict, response_mask, mask_bool, seq_valid, metrics);

    const std::string prefix = "rollout_rs_" + option.name;
    metrics[prefix + "_masked_fraction"] = value_of(masked_mean(at::rsub(keep, 1), response_mask));
    const at::Tensor seq_keep = verdict.token_keep.logical_not().logical_and(mask_bool).logical_not().all(-1);
    const at::Tensor valid_count = seq_valid_float.sum();
    metrics[prefix + "_seq_masked_fraction"] =
        valid_count.gt(0).item<bool>()
            ? value_of((at::rsub(seq_keep.to(log_ratio.scalar_type()), 1.0) * seq_valid_float).sum() / valid_count)
            : 0.0;
  }

  metrics["rollout_rs_masked_fraction"] = value_of(masked_mean(at::rsub(combined, 1), response_mask));
  const at::Tensor final_keep = combined.gt(0.5).logical_and(mask_bool);
  const at::Tensor seq_has_masked = final_keep.logical_not().logical_and(mask_bool).any(-1);
  metrics["rollout_rs_seq_masked_fraction"] = value_of(seq_has_masked.to(at::kFloat).mean());
  result.response_mask = (response_mask * combined).to(response_mask.scalar_type());
  return result;
}

}  // namespace rlcore::rollout_correction_internal
