// Fused CPU loops for the decoder's elementwise chains (RMSNorm, rotary) and
// for a decode step's attention, used when autograd is off: one pass instead of
// 5-10 ATen ops, which dominate a small model's decode step. Internal to the
// sdk library.
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

// grouped_attention for one query per row (a decode step): q [B, H, 1, D],
// k and v [B, KV, S, D] (H a multiple of KV; last dims contiguous; D a multiple
// of 16, at most 256), blocked undefined or bool [B, 1, 1, S]. Returns
// [B, 1, H * D] in q's dtype (float or bfloat16), rounding where the ATen
// sequence rounds; sums and exp run in another order, so values may differ
// from it in the last bits. Undefined when the inputs do not qualify or the
// CPU lacks AVX-512.
at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& blocked,
                            double scaling);

}  // namespace rlcore::model::cpu
