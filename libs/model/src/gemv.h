// Matrix-vector products for the decode step: y = x W^T (+ b) for a few rows
// of x against a weight of the same dtype (bf16 with AVX512-BF16 dot products,
// fp32 with AVX-512 FMAs), accumulated in fp32 and rounded once. A decode step
// is bound by reading the weights; libtorch's GEMMs (oneDNN for bf16, OpenBLAS
// sgemm for fp32) read them at half the speed this does for one row and cost
// more per call than a small model's GEMV moves in data. Internal to the sdk
// library.
#pragma once

#include <ATen/core/Tensor.h>

namespace rlcore::model::cpu {

// x [..., 1, in] (one token per sequence, as in a decode step; at most
// kGemvRows rows, contiguous), weight [out, in] (contiguous),
// bias [out] or undefined, all float or all bfloat16 on the CPU and without
// autograd. Undefined when the inputs do not qualify, the CPU lacks the
// instructions or the generic path is forced (the caller falls back to
// at::linear); cpu_kernels.h counts which path a qualifying call took.
at::Tensor gemv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// Up to 8 rows the products stay bound by reading the weights once; beyond,
// OpenBLAS's threaded sgemm wins (at 5 to 12 rows it runs on one thread).
inline constexpr int64_t kGemvRows = 8;

}  // namespace rlcore::model::cpu
