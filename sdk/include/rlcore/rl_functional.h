// Pure tensor functions of RL post-training that trainers and algorithm plugins
// share, computed as verl's core_algos.py / torch_functional.py compute them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/export.h"

namespace rlcore {

// Masks are [B, T] (bool, integer or floating; nonzero = counted). Values
// outside the mask never reach a result, not even a NaN or an inf there.

// Sum of the masked values (all of them, or along `dim`).
RLCORE_API at::Tensor masked_sum(const at::Tensor& values, const at::Tensor& mask);
RLCORE_API at::Tensor masked_sum(const at::Tensor& values, const at::Tensor& mask, int64_t dim);
// masked_sum / (mask count + 1e-8): an empty mask gives 0, not NaN.
RLCORE_API at::Tensor masked_mean(const at::Tensor& values, const at::Tensor& mask);
RLCORE_API at::Tensor masked_mean(const at::Tensor& values, const at::Tensor& mask, int64_t dim);
// Variance over the mask; `unbiased` applies Bessel's n/(n-1) and then throws
// ValueError when fewer than two elements are masked in (verl raises there too).
RLCORE_API at::Tensor masked_var(const at::Tensor& values, const at::Tensor& mask, bool unbiased = true);
// (values - mean) * rsqrt(unbiased var + 1e-8); with shift_mean=false the mean
// is added back. Positions outside the mask are whitened too (not zeroed).
RLCORE_API at::Tensor masked_whiten(const at::Tensor& values, const at::Tensor& mask, bool shift_mean = true);

// Per-row statistics of each row's group: rows with equal `index` (int64 [B],
// verl's `uid`) are the responses to one prompt. Every field is [B].
struct GroupStats {
  at::Tensor count;   // rows in the row's group
  at::Tensor mean;    // group mean of `scores`
  at::Tensor stddev;  // unbiased (torch.std) group std; 0 for a single-row group
};
RLCORE_API GroupStats group_stats(const at::Tensor& scores, const at::Tensor& index);

// ---- loss aggregation (verl's agg_loss) ------------------------------------

// The modes verl's actor.loss_agg_mode accepts.
RLCORE_API const std::vector<std::string>& loss_agg_modes();

// How a micro-batch's [B, T] loss becomes one scalar. The global counts make
// the gradient independent of how the batch is split over data-parallel
// ranks and micro-batches: pass the whole mini-batch's counts (over all
// ranks) and dp_size; each rank's losses then sum (after DP averaging) to the
// loss of the whole mini-batch. Unset counts are taken from this micro-batch,
// which is only allowed with dp_size == 1.
struct LossAggregation {
  std::string mode = "token-mean";
  int64_t dp_size = 1;
  std::optional<double> batch_num_tokens;   // token-mean: masked tokens in the global batch
  std::optional<double> global_batch_size;  // seq-mean-*: sequences with any masked-in token, global
  std::optional<double> loss_scale_factor;  // seq-mean-token-sum-norm divisor (default: T)
};

// token-mean:              sum(loss * mask) / tokens * dp_size
// token-sum:               sum(loss * mask) * dp_size
// seq-mean-token-sum:      sum_i(sum_t loss * mask) / sequences * dp_size
// seq-mean-token-sum-norm: seq-mean-token-sum / loss_scale_factor
// seq-mean-token-mean:     sum_i(sum_t loss * mask / (n_i + 1e-8)) / sequences * dp_size
// Sequences with no masked-in token are not counted. Where verl would divide
// 0 by a local count of 0 the result is 0. Throws ValueError on an unknown
// mode, mismatched shapes, or dp_size > 1 without the global count.
RLCORE_API at::Tensor agg_loss(const at::Tensor& loss_mat, const at::Tensor& loss_mask,
                               const LossAggregation& aggregation);

// ---- entropy -----------------------------------------------------------------

// Entropy of softmax(logits) over the last dimension: logsumexp - sum(p * logits).
RLCORE_API at::Tensor entropy_from_logits(const at::Tensor& logits);
// Σ_v softmax(logits)_v² over the last dimension (verl's sum_pi_squared). SDK 4.2.
RLCORE_API at::Tensor sum_pi_squared_from_logits(const at::Tensor& logits);
// agg_loss of per-token entropies [B, T] (the actor's entropy metric / bonus).
RLCORE_API at::Tensor aggregate_entropy(const at::Tensor& token_entropy, const at::Tensor& response_mask,
                                        const LossAggregation& aggregation);

// ---- KL estimators -----------------------------------------------------------

// The estimator names kl_penalty accepts (algorithm.kl_penalty, actor.kl_loss_type),
// each also with a '+' suffix.
RLCORE_API const std::vector<std::string>& kl_penalty_types();

// Per-token KL(pi || ref) estimate from log-probs (http://joschu.net/blog/kl-approx.html):
//   kl, k1:          log_prob - ref_log_prob
//   abs:             |log_prob - ref_log_prob|
//   mse, k2:         0.5 * (log_prob - ref_log_prob)^2
//   low_var_kl, k3:  exp(d) - d - 1 with d = clamp(ref - log_prob, -20, 20), clamped to [-10, 10]
// A '+' suffix ("k3+") keeps the forward value but takes k2's gradient
// (straight-through), as verl does. Throws ValueError naming the known types.
RLCORE_API at::Tensor kl_penalty(const at::Tensor& log_prob, const at::Tensor& ref_log_prob, const std::string& type);

// ---- critic ------------------------------------------------------------------

struct ValueLossResult {
  at::Tensor loss;      // scalar, differentiable w.r.t. vpreds
  at::Tensor clipfrac;  // scalar: masked fraction where the clipped loss was larger
};

// verl's compute_value_loss: vpreds clipped to values +- cliprange_value,
// loss = 0.5 * agg_loss(max((vpreds - returns)^2, (clipped - returns)^2)).
RLCORE_API ValueLossResult compute_value_loss(const at::Tensor& vpreds, const at::Tensor& returns,
                                              const at::Tensor& values, const at::Tensor& response_mask,
                                              double cliprange_value, const LossAggregation& aggregation);

// ---- checks shared by the algorithm code -------------------------------------

// Throws ValueError naming `what` unless `tensor` is defined with `shape`.
RLCORE_API void require_shape(const at::Tensor& tensor, at::IntArrayRef shape, const std::string& what);
// Throws ValueError naming `what` unless `tensor` is defined, 2-D and floating.
RLCORE_API void require_float_matrix(const at::Tensor& tensor, const std::string& what);

}  // namespace rlcore
