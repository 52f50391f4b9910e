// Fast paths of the swap copy. libtorch 1.13's copy_ goes through
// TensorIterator with a scalar fp32 -> bf16 cast (about 5 ns per element here)
// and spins up its OpenMP pool for every tensor; a plain loop the compiler
// vectorises runs at memory speed. Built with -O3 (CMakeLists.txt).
#include "weight_copy.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "rlcore/model/cpu_kernels.h"

namespace rlcore::hybrid_engine {
namespace {

// Below this many elements a tensor is copied on the calling thread: waking
// the pool costs more than it saves, and a loaded machine makes that worse.
constexpr int64_t kParallelGrain = int64_t{1} << 20;

// c10::BFloat16's round-to-nearest-even, written branch-free so it vectorises.
// Inlined into one function per instruction set below, each vectorised for it.
__attribute__((always_inline)) inline void float_to_bf16_body(const float* __restrict in, uint16_t* __restrict out,
                                                              int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &in[i], sizeof(bits));
    const uint32_t rounded = (bits + ((bits >> 16) & 1u) + 0x7FFFu) >> 16;
    out[i] = static_cast<uint16_t>(in[i] != in[i] ? 0x7FC0u : rounded);
  }
}

void float_to_bf16_generic(const float* __restrict in, uint16_t* __restrict out, int64_t n) {
  float_to_bf16_body(in, out, n);
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void float_to_bf16_avx512(const float* __restrict in, uint16_t* __restrict out,
                                                             int64_t n) {
  float_to_bf16_body(in, out, n);
}

__attribute__((target("avx2"))) void float_to_bf16_avx2(const float* __restrict in, uint16_t* __restrict out,
                                                        int64_t n) {
  float_to_bf16_body(in, out, n);
}
#endif

// Process-wide by nature, like the SDK's CPU kernel counters.
std::array<std::atomic<int64_t>, 3> cast_calls{};

bool plain_cpu(const at::Tensor& t) { return t.device().is_cpu() && !t.is_conj() && !t.is_neg(); }

// A 2-D tensor whose rows are each contiguous but not adjacent: a dim-1
// narrow, i.e. a row-parallel tensor-parallel slice.
bool contiguous_rows(const at::Tensor& t) { return t.dim() == 2 && t.stride(1) == 1 && t.stride(0) >= t.size(1); }

// Copies n elements from `from` to `to`, same dtype or fp32 -> bf16 (with `cast`).
void copy_run(const at::Tensor& src, const at::Tensor& out, CastKernel cast, const char* from, char* to, int64_t n) {
  if (src.scalar_type() == out.scalar_type()) {
    std::memcpy(to, from, static_cast<size_t>(n * static_cast<int64_t>(out.element_size())));
  } else {
    float_to_bf16(cast, reinterpret_cast<const float*>(from), reinterpret_cast<uint16_t*>(to), n);
  }
}

}  // namespace

CastKernel cast_kernel() {
  if (model::generic_cpu_kernels()) return CastKernel::kGeneric;
#if defined(__x86_64__)
  static const CastKernel widest = __builtin_cpu_supports("avx512f") ? CastKernel::kAvx512
                                   : __builtin_cpu_supports("avx2")  ? CastKernel::kAvx2
                                                                     : CastKernel::kGeneric;
  return widest;
#else
  return CastKernel::kGeneric;
#endif
}

int64_t cast_kernel_calls(CastKernel kernel) { return cast_calls[static_cast<std::size_t>(kernel)].load(); }

void float_to_bf16(CastKernel kernel, const float* in, uint16_t* out, int64_t n) {
  switch (kernel) {
#if defined(__x86_64__)
    case CastKernel::kAvx512:
      return float_to_bf16_avx512(in, out, n);
    case CastKernel::kAvx2:
      return float_to_bf16_avx2(in, out, n);
#endif
    default:
      return float_to_bf16_generic(in, out, n);
  }
}

void copy_weight(const at::Tensor& src, at::Tensor& out) {
  const int64_t n = out.numel();
  const bool same = src.scalar_type() == out.scalar_type();
  const bool to_bf16 = src.scalar_type() == at::kFloat && out.scalar_type() == at::kBFloat16;
  const bool fast_layout = src.is_contiguous() || (contiguous_rows(src) && src.sizes() == out.sizes());
  if (!plain_cpu(src) || !plain_cpu(out) || !out.is_contiguous() || !fast_layout || src.numel() != n ||
      !(same || to_bf16)) {
    out.copy_(src);
    return;
  }
  const CastKernel cast = same ? CastKernel::kGeneric : cast_kernel();  // unused by a same-dtype copy
  if (!same) cast_calls[static_cast<std::size_t>(cast)].fetch_add(1, std::memory_order_relaxed);
  const auto in_size = static_cast<int64_t>(src.element_size());
  const auto out_size = static_cast<int64_t>(out.element_size());
  const char* from = static_cast<const char*>(src.data_ptr());
  char* to = static_cast<char*>(out.data_ptr());
  if (src.is_contiguous()) {
    at::parallel_for(0, n, kParallelGrain, [&](int64_t begin, int64_t end) {
      copy_run(src, out, cast, from + begin * in_size, to + begin * out_size, end - begin);
    });
    return;
  }
  const int64_t cols = src.size(1);
  const int64_t row_stride = src.stride(0);
  at::parallel_for(0, src.size(0), std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(cols, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t row = begin; row < end; ++row) {
                       copy_run(src, out, cast, from + row * row_stride * in_size, to + row * cols * out_size, cols);
                     }
                   });
}

}  // namespace rlcore::hybrid_engine
