// Attention through libtorch's fused scaled_dot_product_attention (flash and
// memory-efficient kernels) for CUDA tensors, where the libtorch has it.
#pragma once

#include <ATen/core/Tensor.h>

namespace rlcore::model {

// Same contract as grouped_attention; undefined when the fused kernel does not
// apply (host tensors, or a libtorch older than 2.5, which lacks enable_gqa).
at::Tensor fused_grouped_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& blocked, double scaling);

}  // namespace rlcore::model
