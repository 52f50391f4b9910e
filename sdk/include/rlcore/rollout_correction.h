// Rollout correction (verl 0.9.1's trainer/ppo/rollout_corr_helper.py): importance
// weights and rejection masks that correct for the gap between the rollout
// engine's log-probs and the trainer's, with verl's diagnostics.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "rlcore/export.h"

namespace rlcore {

// verl's algorithm.rollout_correction keys (bypass_mode / loss_type are not here).
// Thresholds are strings as verl's YAML may hold them ("2.0", "0.5_5.0", "0.5_2.0,0.01").
struct RolloutCorrectionConfig {
  // "" (off), "token" or "sequence": the level of the IS weights.
  std::string rollout_is;
  // "upper" truncates the weights at upper (TIS); "lower_upper" zeroes the
  // weights outside [lower, upper] (IcePop).
  std::string rollout_is_threshold = "2.0";
  // Divide the weights by their batch mean (token- or sequence-level).
  bool rollout_is_batch_normalize = false;
  // "" (off) or comma-separated rejection options, every one of which must pass:
  // token_k1..k3, seq_sum_k1..k3, seq_mean_k1..k3, seq_max_k2, seq_max_k3.
  std::string rollout_rs;
  // One threshold shared by every option, or one per (deduplicated) option. A
  // k1 option takes "lower_upper" ratio bounds or an upper whose lower is
  // 1/upper; k2/k3 options take an upper bound.
  std::string rollout_rs_threshold;
};

struct RolloutCorrectionResult {
  at::Tensor rollout_is_weights;          // [B, T], zero on padding; undefined when rollout_is is off
  at::Tensor response_mask;               // [B, T] after rejection, in the input mask's dtype
  std::map<std::string, double> metrics;  // "rollout_corr/..." as verl names them
};

// Throws ConfigError naming the key (key_prefix + ".rollout_rs_threshold", ...)
// for every setting verl rejects with ValueError or TypeError: an unknown IS
// level or rejection option, a threshold that is missing, not a number, not
// positive, NaN, or has lower > upper, a '_' in a k2/k3 threshold, or a
// threshold count that is neither 1 nor the number of options.
RLCORE_API void validate_rollout_correction_config(const RolloutCorrectionConfig& config,
                                                   const std::string& key_prefix);

// verl's compute_rollout_correction_and_rejection_mask on [B, T] log-probs of
// the trainer (old_log_prob) and of the rollout engine, with the non-distributed
// batch normalization. No autograd; runs on the tensors' device. Throws
// ConfigError for a bad config (keys under "algorithm.rollout_correction") and
// ValueError for mismatched shapes or a mask with no valid token.
RLCORE_API RolloutCorrectionResult compute_rollout_correction(const at::Tensor& old_log_prob,
                                                              const at::Tensor& rollout_log_prob,
                                                              const at::Tensor& response_mask,
                                                              const RolloutCorrectionConfig& config);

// verl's compute_rollout_corr_metrics_from_logprobs: the off-policy diagnostics
// (kl, k3_kl, training/rollout ppl and log-ppl, log_ppl_diff*, ppl_ratio,
// chi2_token, chi2_seq) as "rollout_corr/..." for any policy's log-probs
// against the rollout's; compute_rollout_correction includes them.
RLCORE_API std::map<std::string, double> compute_offpolicy_metrics(const at::Tensor& log_prob,
                                                                   const at::Tensor& rollout_log_prob,
                                                                   const at::Tensor& response_mask);

}  // namespace rlcore
