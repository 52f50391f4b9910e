// Masked reductions, whitening, group statistics, loss aggregation, entropy
// and the clipped value loss, as verl computes them.
#include "rlcore/rl_functional.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "rlcore/error.h"
#include "rlcore/string_join.h"

namespace rlcore {
namespace {

constexpr double kMeanEpsilon = 1e-8;    // verl's masked_mean denominator guard
constexpr double kWhitenEpsilon = 1e-8;  // verl's masked_whiten variance guard

std::string shape_text(at::IntArrayRef shape) {
  return "[" + join(shape, ", ", [](int64_t d) { return std::to_string(d); }) + "]";
}

// The mask as 0/1 in the values' dtype, on the values' device.
at::Tensor mask_like(const at::Tensor& mask, const at::Tensor& values) {
  return mask.to(values.device()).ne(0).to(values.scalar_type());
}

void require_same_shape(const at::Tensor& values, const at::Tensor& mask, const char* what) {
  if (!values.defined() || !mask.defined()) throw ValueError(std::string(what) + ": values and mask must be defined");
  if (values.sizes() != mask.sizes()) {
    throw ValueError(std::string(what) + ": mask shape " + shape_text(mask.sizes()) + " differs from values shape " +
                     shape_text(values.sizes()));
  }
}

}  // namespace

void require_shape(const at::Tensor& tensor, at::IntArrayRef shape, const std::string& what) {
  if (!tensor.defined()) throw ValueError("tensor '" + what + "' is missing");
  if (tensor.sizes() != shape) {
    throw ValueError("tensor '" + what + "' has shape " + shape_text(tensor.sizes()) + ", expected " +
                     shape_text(shape));
  }
}

void require_float_matrix(const at::Tensor& tensor, const std::string& what) {
  if (!tensor.defined()) throw ValueError("tensor '" + what + "' is missing");
  if (tensor.dim() != 2) {
    throw ValueError("tensor '" + what + "' must be 2-D [batch, response_length], got shape " +
                     shape_text(tensor.sizes()));
  }
  if (!at::isFloatingType(tensor.scalar_type())) {
    throw ValueError("tensor '" + what + "' must be floating point, got " +
                     std::string(c10::toString(tensor.scalar_type())));
  }
}

at::Tensor masked_sum(const at::Tensor& values, const at::Tensor& mask) {
  require_same_shape(values, mask, "masked_sum");
  const at::Tensor m = mask_like(mask, values);
  return at::where(m.to(at::kBool), values, at::zeros({}, values.options())).sum();
}

at::Tensor masked_sum(const at::Tensor& values, const at::Tensor& mask, int64_t dim) {
  require_same_shape(values, mask, "masked_sum");
  const at::Tensor m = mask_like(mask, values);
  return at::where(m.to(at::kBool), values, at::zeros({}, values.options())).sum(dim);
}

at::Tensor masked_mean(const at::Tensor& values, const at::Tensor& mask) {
  return masked_sum(values, mask) / (mask_like(mask, values).sum() + kMeanEpsilon);
}

at::Tensor masked_mean(const at::Tensor& values, const at::Tensor& mask, int64_t dim) {
  return masked_sum(values, mask, dim) / (mask_like(mask, values).sum(dim) + kMeanEpsilon);
}

at::Tensor masked_var(const at::Tensor& values, const at::Tensor& mask, bool unbiased) {
  const at::Tensor mean = masked_mean(values, mask);
  const at::Tensor centered = values - mean;
  at::Tensor variance = masked_mean(centered * centered, mask);
  if (unbiased) {
    const double count = mask_like(mask, values).sum().item<double>();
    if (count == 0)
      throw ValueError("masked_var: the mask selects no element (need at least 2 for an unbiased variance)");
    if (count == 1)
      throw ValueError("masked_var: the mask selects one element (need at least 2 for an unbiased variance)");
    variance = variance * (count / (count - 1));
  }
  return variance;
}

at::Tensor masked_whiten(const at::Tensor& values, const at::Tensor& mask, bool shift_mean) {
  const at::Tensor mean = masked_mean(values, mask);
  const at::Tensor var = masked_var(values, mask, /*unbiased=*/true);
  at::Tensor whitened = (values - mean) * at::rsqrt(var + kWhitenEpsilon);
  if (!shift_mean) whitened = whitened + mean;
  return whitened;
}

GroupStats group_stats(const at::Tensor& scores, const at::Tensor& index) {
  if (!scores.defined() || scores.dim() != 1) throw ValueError("group_stats: scores must be a 1-D tensor [batch]");
  require_shape(index, {scores.size(0)}, "index");
  if (at::isFloatingType(index.scalar_type()) || index.scalar_type() == at::kBool) {
    throw ValueError("tensor 'index' must hold integer group ids, got " +
                     std::string(c10::toString(index.scalar_type())));
  }
  const at::Tensor ids = index.to(scores.device(), at::kLong);
  const auto unique = at::_unique2(ids, /*sorted=*/true, /*return_inverse=*/true, /*return_counts=*/true);
  const at::Tensor inverse = std::get<1>(unique).reshape({-1});
  const at::Tensor group_count = std::get<2>(unique).to(scores.scalar_type());
  const int64_t groups = group_count.size(0);

  const at::Tensor group_sum = at::zeros({groups}, scores.options()).index_add_(0, inverse, scores);
  const at::Tensor group_mean = group_sum / group_count;
  const at::Tensor deviation = scores - group_mean.index_select(0, inverse);
  const at::Tensor group_ss = at::zeros({groups}, scores.options()).index_add_(0, inverse, deviation * deviation);
  // torch.std is unbiased; a single row has no spread to estimate (0 here, NaN in torch).
  const at::Tensor group_std = at::sqrt(group_ss / (group_count - 1).clamp_min(1));

  return GroupStats{group_count.index_select(0, inverse), group_mean.index_select(0, inverse),
                    group_std.index_select(0, inverse)};
}

const std::vector<std::string>& loss_agg_modes() {
  static const std::vector<std::string> modes = {"token-mean", "token-sum", "seq-mean-token-sum",
                                                 "seq-mean-token-sum-norm", "seq-mean-token-mean"};
  return modes;
}

at::Tensor agg_loss(const at::Tensor& loss_mat, const at::Tensor& loss_mask, const LossAggregation& aggregation) {
  require_float_matrix(loss_mat, "loss_mat");
  require_shape(loss_mask, loss_mat.sizes(), "loss_mask");
  const std::string& mode = aggregation.mode;
  const auto& modes = loss_agg_modes();
  if (std::find(modes.begin(), modes.end(), mode) == modes.end()) {
    throw ValueError("unknown loss_agg_mode '" + mode + "'; known modes: " + join(modes));
  }
  if (aggregation.dp_size < 1)
    throw ValueError("loss aggregation: dp_size must be >= 1, got " + std::to_string(aggregation.dp_size));
  const double dp_size = static_cast<double>(aggregation.dp_size);
  const at::Tensor mask = mask_like(loss_mask, loss_mat);

  auto global_or_local = [&](const std::optional<double>& global, const at::Tensor& local, const char* name) {
    if (global) {
      if (!(*global > 0)) throw ValueError(std::string("loss aggregation: ") + name + " must be > 0");
      return at::full({}, *global, loss_mat.options());
    }
    if (aggregation.dp_size > 1) {
      throw ValueError(std::string("loss aggregation '") + mode + "' needs the global " + name + " when dp_size > 1");
    }
    // An all-masked micro-batch contributes 0 rather than verl's 0/0.
    return local.clamp_min(1);
  };

  if (mode == "token-mean") {
    const at::Tensor tokens = global_or_local(aggregation.batch_num_tokens, mask.sum(), "batch_num_tokens");
    return masked_sum(loss_mat, mask) / tokens * dp_size;
  }
  if (mode == "token-sum") return masked_sum(loss_mat, mask) * dp_size;

  const at::Tensor tokens_per_seq = mask.sum(-1);
  const at::Tensor seq_mask = tokens_per_seq.gt(0).to(loss_mat.scalar_type());
  at::Tensor seq_losses = masked_sum(loss_mat, mask, -1);
  if (mode == "seq-mean-token-mean") seq_losses = seq_losses / (tokens_per_seq + kMeanEpsilon);
  const at::Tensor sequences = global_or_local(aggregation.global_batch_size, seq_mask.sum(), "global_batch_size");
  at::Tensor loss = masked_sum(seq_losses, seq_mask) / sequences * dp_size;
  if (mode == "seq-mean-token-sum-norm") {
    const double scale = aggregation.loss_scale_factor.value_or(static_cast<double>(loss_mat.size(-1)));
    if (!(scale > 0)) throw ValueError("loss aggregation: loss_scale_factor must be > 0");
    loss = loss / scale;
  }
  return loss;
}

at::Tensor entropy_from_logits(const at::Tensor& logits) {
  if (!logits.defined() || logits.dim() < 1) throw ValueError("tensor 'logits' is missing");
  const at::Tensor probs = at::softmax(logits, -1);
  return at::logsumexp(logits, {-1}) - (probs * logits).sum(-1);
}

at::Tensor sum_pi_squared_from_logits(const at::Tensor& logits) {
  if (!logits.defined() || logits.dim() < 1) throw ValueError("tensor 'logits' is missing");
  return at::softmax(logits, -1).square().sum(-1);
}

at::Tensor aggregate_entropy(const at::Tensor& token_entropy, const at::Tensor& response_mask,
                             const LossAggregation& aggregation) {
  return agg_loss(token_entropy, response_mask, aggregation);
}

ValueLossResult compute_value_loss(const at::Tensor& vpreds, const at::Tensor& returns, const at::Tensor& values,
                                   const at::Tensor& response_mask, double cliprange_value,
                                   const LossAggregation& aggregation) {
  require_float_matrix(vpreds, "vpreds");
  require_shape(returns, vpreds.sizes(), "returns");
  require_shape(values, vpreds.sizes(), "values");
  require_shape(response_mask, vpreds.sizes(), "response_mask");
  if (!(cliprange_value >= 0)) throw ValueError("cliprange_value must be >= 0");
  const at::Tensor clipped = at::max(at::min(vpreds, values + cliprange_value), values - cliprange_value);
  const at::Tensor losses1 = (vpreds - returns).square();
  const at::Tensor losses2 = (clipped - returns).square();
  const at::Tensor loss = 0.5 * agg_loss(at::max(losses1, losses2), response_mask, aggregation);
  const at::Tensor clipfrac = masked_mean(losses2.gt(losses1).to(vpreds.scalar_type()), response_mask).detach();
  return ValueLossResult{loss, clipfrac};
}

const std::vector<std::string>& kl_penalty_types() {
  // verl's estimators, each also with '+': its value, k2's gradient (straight-through).
  static const std::vector<std::string> types = [] {
    const std::vector<std::string> base = {"kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"};
    std::vector<std::string> all = base;
    for (const std::string& name : base) all.push_back(name + "+");
    return all;
  }();
  return types;
}

at::Tensor kl_penalty(const at::Tensor& log_prob, const at::Tensor& ref_log_prob, const std::string& type) {
  if (!log_prob.defined()) throw ValueError("tensor 'log_prob' is missing");
  require_shape(ref_log_prob, log_prob.sizes(), "ref_log_prob");
  const bool straight_through = !type.empty() && type.back() == '+';
  const std::string base = straight_through ? type.substr(0, type.size() - 1) : type;

  at::Tensor forward;
  const at::Tensor diff = log_prob - ref_log_prob;
  if (base == "kl" || base == "k1") {
    forward = diff;
  } else if (base == "abs") {
    forward = diff.abs();
  } else if (base == "mse" || base == "k2") {
    forward = 0.5 * diff.square();
  } else if (base == "low_var_kl" || base == "k3") {
    const at::Tensor kl = (ref_log_prob - log_prob).clamp(-20, 20);
    forward = (at::exp(kl) - kl - 1).clamp(-10, 10);
  } else {
    throw ValueError("unknown KL penalty type '" + type + "'; known types: " + join(kl_penalty_types()));
  }
  if (!straight_through) return forward;
  const at::Tensor backward = 0.5 * diff.square();
  return backward - backward.detach() + forward.detach();
}

}  // namespace rlcore
