// A batch-invariant linear layer (issue 54: the rollout's log-probs equal the
// trainer's by construction). y = x W^T (+ b), where every output element is
// computed by one fixed recipe, whatever the number of rows, their order, the
// tiling or the threads:
//
//   16 fp32 lanes; lane l accumulates x[k] * w[k] over k = l, l + 16, ... in
//   ascending order with fused multiply-adds (lanes past the end of the row
//   take nothing); the lanes are summed pairwise (l with l + 8, then + 4,
//   + 2, + 1); the bias is added last.
//
// So a token's projection has the same bits alone, in a batch of 64, in a
// prefill or in a decode step. The AVX-512 version tiles rows and outputs so
// that loads are shared; the portable one follows the recipe element by
// element (the same bits, slower), on CPUs without AVX-512 or when the generic
// kernels are forced (cpu_kernels.h). fp32 only, for now.
#pragma once

#include <ATen/core/Tensor.h>

namespace rlcore::model {

// x [..., in] and weight [out, in], float on the CPU (made contiguous), bias
// [out] or undefined. No autograd. ValueError for other inputs.
at::Tensor exact_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

}  // namespace rlcore::model
