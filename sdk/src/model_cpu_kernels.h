// Fused CPU loops for the decoder's elementwise chains (RMSNorm, rotary), used
// when autograd is off: one pass instead of 5-8 ATen ops, which dominate a
// small model's decode step. Internal to the sdk library.
#pragma once

#include <ATen/core/Tensor.h>

namespace rlcore::model::cpu {

// weight * cast(x * rsqrt(mean(x^2, -1) + eps)) for contiguous CPU x [..., dim]
// and weight [dim] of one dtype (float or bfloat16), rounding where HF's op
// sequence rounds; the sum of squares is accumulated in double, so results
// may differ from ATen's reduction order in the last bit. Undefined when the
// inputs do not qualify (the caller falls back to ATen ops).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// x * cos + rotate_half(x) * sin for CPU x [B, H, T, D] (last dim contiguous)
// and contiguous cos/sin [B, T, D] of x's dtype (float or bfloat16), bit for
// bit what those ATen ops give. Undefined when the inputs do not qualify.
at::Tensor rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace rlcore::model::cpu
