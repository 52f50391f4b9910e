// Attention through libtorch's fused scaled_dot_product_attention (flash and
// memory-efficient kernels) for CUDA tensors, where the libtorch has it.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace rlcore::model {

// Same contract as grouped_attention; undefined when the fused kernel does not
// apply (host tensors, or a libtorch older than 2.5, which lacks enable_gqa).
at::Tensor fused_grouped_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& blocked, double scaling);

// Causal attention over sequences packed back to back, all in one
// variable-length flash-attention call: q [1, H, T, D], k, v [1, KV, T, D]
// (KV dividing H), sequence i at [offsets[i], offsets[i + 1]), the longest
// `longest` tokens. Returns [1, T, H * D], or undefined where the kernel does
// not apply (host tensors, fp32, value and key widths that differ, a libtorch
// older than 2.5); the caller then attends one sequence at a time.
at::Tensor flash_varlen_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const std::vector<int64_t>& offsets, int64_t longest, double scaling);

}  // namespace rlcore::model
