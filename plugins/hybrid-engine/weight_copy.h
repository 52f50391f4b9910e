// copy_weight: the swap's per-tensor copy into a bucket view, with fast paths
// for the cases a swap actually hits on CPU (same dtype; fp32 master -> bf16).
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace rlcore::hybrid_engine {

// out <- src converted to out's dtype, bitwise what out.copy_(src) writes for
// every non-NaN value (bf16 rounds to nearest even). Fast paths: CPU tensors
// of one dtype or fp32 -> bf16, the source contiguous or a 2-D tensor with
// contiguous rows (a row-parallel TP slice); anything else falls back to copy_.
void copy_weight(const at::Tensor& src, at::Tensor& out);

// The versions of the fp32 -> bf16 loop, one body vectorised for each; all
// write the same bits.
enum class CastKernel { kAvx512, kAvx2, kGeneric };

// The version copy_weight's fp32 -> bf16 fast path runs now: the widest this
// CPU has (cpuid, read once), or kGeneric while the CPU kernels are forced
// generic (rlcore/model/cpu_kernels.h, RLCORE_CPU_KERNELS=generic).
CastKernel cast_kernel();

// fp32 -> bf16 fast-path copies since the process started that ran `kernel`.
int64_t cast_kernel_calls(CastKernel kernel);

// One version of the loop, whatever cast_kernel() says (the caller makes sure
// the CPU has its instructions): for tests that compare the versions.
void float_to_bf16(CastKernel kernel, const float* in, uint16_t* out, int64_t n);

}  // namespace rlcore::hybrid_engine
