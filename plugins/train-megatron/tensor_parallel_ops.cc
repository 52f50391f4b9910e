// Tensor-parallel autograd functions (Megatron's f / g operators).
#include "tensor_parallel_ops.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

namespace rlcore::train_megatron {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const CommGroup& group_of(AutogradContext* ctx) {
  return *reinterpret_cast<const CommGroup*>(ctx->saved_data["group"].toInt());
}

at::Tensor all_reduce_sum(const CommGroup& group, const at::Tensor& x) {
  if (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble) {
    at::Tensor sum = x.contiguous().clone();
    group.all_reduce(sum);
    return sum;
  }
  at::Tensor wide = x.to(at::kFloat);
  group.all_reduce(wide);
  return wide.to(x.scalar_type());
}

struct CopyToTp : torch::autograd::Function<CopyToTp> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group) {
    ctx->saved_data["group"] = group;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_reduce_sum(group_of(ctx), grads[0]), at::Tensor()};
  }
};

struct ReduceFromTp : torch::autograd::Function<ReduceFromTp> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group) {
    return all_reduce_sum(*reinterpret_cast<const CommGroup*>(group), x);
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], at::Tensor()}; }
};

int64_t handle(const CommGroup& group) { return reinterpret_cast<int64_t>(&group); }

}  // namespace

at::Tensor copy_to_tp(const at::Tensor& x, const CommGroup& tp) {
  if (tp.size() == 1) return x;
  return CopyToTp::apply(x, handle(tp));
}

at::Tensor reduce_from_tp(const at::Tensor& x, const CommGroup& tp) {
  if (tp.size() == 1) return x;
  return ReduceFromTp::apply(x, handle(tp));
}

at::Tensor vocab_parallel_embedding(const at::Tensor& ids, const at::Tensor& weight_shard, int64_t vocab_start,
                                    const CommGroup& tp) {
  if (tp.size() == 1) return at::embedding(weight_shard, ids);
  const at::Tensor local = ids - vocab_start;
  const at::Tensor inside = local.ge(0).logical_and(local.lt(weight_shard.size(0)));
  const at::Tensor rows = at::embedding(weight_shard, local.clamp(0, weight_shard.size(0) - 1));
  return reduce_from_tp(rows * inside.unsqueeze(-1).to(rows.scalar_type()), tp);
}

TokenLogProbs vocab_parallel_log_probs(const at::Tensor& logits_shard, const at::Tensor& targets, int64_t vocab_start,
                                       const CommGroup& tp, bool entropy, bool sum_pi_squared) {
  const at::Tensor logits = logits_shard.to(at::kFloat);
  // Any shift works for log-sum-exp; the global max keeps exp() in range.
  at::Tensor shift = logits.detach().amax(-1, /*keepdim=*/true);
  if (tp.size() > 1) shift = at::stack(tp.all_gather(shift.contiguous()), 0).amax(0);
  const at::Tensor shifted = logits - shift;
  const at::Tensor exp = shifted.exp();
  const at::Tensor sum_exp = reduce_from_tp(exp.sum(-1), tp);
  const at::Tensor local = targets - vocab_start;
  const at::Tensor inside = local.ge(0).logical_and(local.lt(logits.size(-1)));
  const at::Tensor picked = shifted.gather(-1, local.clamp(0, logits.size(-1) - 1).unsqueeze(-1)).squeeze(-1);
  const at::Tensor target = reduce_from_tp(picked * inside.to(at::kFloat), tp);
  const at::Tensor log_z = sum_exp.log();
  TokenLogProbs out;
  out.log_prob = target - log_z;
  // H = log Z - sum_v p_v * shifted_v.
  if (entropy) out.entropy = log_z - reduce_from_tp((exp * shifted).sum(-1), tp) / sum_exp;
  if (sum_pi_squared) out.sum_pi_squared = reduce_from_tp(exp.square().sum(-1), tp) / sum_exp.square();
  return out;
}

}  // namespace rlcore::train_megatron
