// copy_weight: the swap's per-tensor copy into a bucket view, with fast paths
// for the cases a swap actually hits on CPU (same dtype; fp32 master -> bf16).
#pragma once

#include <ATen/core/Tensor.h>

namespace rlcore::hybrid {

// out <- src converted to out's dtype, bitwise what out.copy_(src) writes for
// every non-NaN value (bf16 rounds to nearest even). Fast paths: CPU tensors
// of one dtype or fp32 -> bf16, the source contiguous or a 2-D tensor with
// contiguous rows (a row-parallel TP slice); anything else falls back to copy_.
void copy_weight(const at::Tensor& src, at::Tensor& out);

}  // namespace rlcore::hybrid
