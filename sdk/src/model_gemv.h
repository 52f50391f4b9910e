// Matrix-vector products for the decode step: y = x W^T (+ b) for a few rows
// of bf16 x against a bf16 weight, accumulated in fp32 with AVX512-BF16 dot
// products and rounded to bf16 once. oneDNN's bf16 GEMM is built for large M
// and costs more per call than a decode step's GEMV of a small model moves in
// data. Internal to the sdk library.
#pragma once

#include <ATen/core/Tensor.h>

namespace rlcore::model::cpu {

// x [..., in] (at most kGemvRows rows, contiguous), weight [out, in] (contiguous),
// bias [out] or undefined, all bf16 on the CPU and without autograd. Undefined
// when the inputs do not qualify or the CPU lacks AVX512-BF16 (the caller falls
// back to at::linear).
at::Tensor gemv_bf16(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

inline constexpr int64_t kGemvRows = 4;

}  // namespace rlcore::model::cpu
