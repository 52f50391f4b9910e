// AdamW as torch's single-tensor (foreach=False) implementation computes it:
// one fused pass over contiguous fp32 CPU shards (the tensor-op form reads and
// writes every shard about ten times and allocates two shard-sized temporaries),
// the tensor ops on other devices.
#include "adamw.h"

#include <cmath>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

namespace rlcore::train_common {
namespace {

bool fusable(const at::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous(); }

// Per element, the same float operations in the same order as torch's kernels
// for mul_, add_(alpha), addcmul_, sqrt, div, add_ and addcdiv_.
void adamw_cpu_fused(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                     const AdamWHyper& hyper, double bias_correction1, double bias_correction2) {
  const float decay = static_cast<float>(1.0 - hyper.lr * hyper.weight_decay);
  const float beta1 = static_cast<float>(hyper.beta1);
  const float one_minus_beta1 = static_cast<float>(1.0 - hyper.beta1);
  const float beta2 = static_cast<float>(hyper.beta2);
  const float one_minus_beta2 = static_cast<float>(1.0 - hyper.beta2);
  const float sqrt_bc2 = static_cast<float>(std::sqrt(bias_correction2));
  const float eps = static_cast<float>(hyper.eps);
  const float step_size = static_cast<float>(-hyper.lr / bias_correction1);
  const float scale = static_cast<float>(hyper.grad_scale);  // times 1.0f is exact: unclipped steps are unchanged
  at::parallel_for(0, n, 1 << 15, [=](int64_t begin, int64_t end) {
    // Four distinct shards: with __restrict and this file's flags (CMakeLists.txt) the loop
    // compiles to packed sqrt and div, which the scalar form spent most of the update in.
    float* __restrict p_out = param + begin;
    const float* __restrict g_in = grad + begin;
    float* __restrict m_out = exp_avg + begin;
    float* __restrict v_out = exp_avg_sq + begin;
    const int64_t count = end - begin;
    for (int64_t i = 0; i < count; ++i) {
      const float g = g_in[i] * scale;
      const float p = p_out[i] * decay;
      const float m = m_out[i] * beta1 + one_minus_beta1 * g;
      const float v = v_out[i] * beta2 + one_minus_beta2 * g * g;
      const float denom = std::sqrt(v) / sqrt_bc2 + eps;
      m_out[i] = m;
      v_out[i] = v;
      p_out[i] = p + step_size * m / denom;
    }
  });
}

}  // namespace

void adamw_update(at::Tensor& param, const at::Tensor& grad, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                  const AdamWHyper& hyper) {
  const double bias_correction1 = 1.0 - std::pow(hyper.beta1, static_cast<double>(hyper.step));
  const double bias_correction2 = 1.0 - std::pow(hyper.beta2, static_cast<double>(hyper.step));
  if (fusable(param) && fusable(grad) && fusable(exp_avg) && fusable(exp_avg_sq) && grad.numel() == param.numel() &&
      exp_avg.numel() == param.numel() && exp_avg_sq.numel() == param.numel()) {
    adamw_cpu_fused(param.data_ptr<float>(), grad.data_ptr<float>(), exp_avg.data_ptr<float>(),
                    exp_avg_sq.data_ptr<float>(), param.numel(), hyper, bias_correction1, bias_correction2);
    return;
  }
  const at::Tensor g = hyper.grad_scale != 1.0 ? grad * hyper.grad_scale : grad;
  param.mul_(1.0 - hyper.lr * hyper.weight_decay);
  exp_avg.mul_(hyper.beta1).add_(g, 1.0 - hyper.beta1);
  exp_avg_sq.mul_(hyper.beta2).addcmul_(g, g, 1.0 - hyper.beta2);
  const at::Tensor denom = (exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(hyper.eps);
  param.addcdiv_(exp_avg, denom, -hyper.lr / bias_correction1);
}

}  // namespace rlcore::train_common
