// Fast paths of the swap copy. libtorch 1.13's copy_ goes through
// TensorIterator with a scalar fp32 -> bf16 cast (about 5 ns per element here)
// and spins up its OpenMP pool for every tensor; a plain loop the compiler
// vectorises runs at memory speed. Built with -O3 (CMakeLists.txt).
#include "weight_copy.h"

#include <cstring>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

namespace rlcore::hybrid {
namespace {

// Below this many elements a tensor is copied on the calling thread: waking
// the pool costs more than it saves, and a loaded machine makes that worse.
constexpr int64_t kParallelGrain = int64_t{1} << 20;

// c10::BFloat16's round-to-nearest-even, written branch-free so it vectorises.
__attribute__((target_clones("avx512f", "avx2", "default"))) void float_to_bf16(const float* __restrict in,
                                                                                  uint16_t* __restrict out,
                                                                                  int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &in[i], sizeof(bits));
    const uint32_t rounded = (bits + ((bits >> 16) & 1u) + 0x7FFFu) >> 16;
    out[i] = static_cast<uint16_t>(in[i] != in[i] ? 0x7FC0u : rounded);
  }
}

bool plain_cpu(const at::Tensor& t) { return t.device().is_cpu() && t.is_contiguous() && !t.is_conj() && !t.is_neg(); }

}  // namespace

void copy_weight(const at::Tensor& src, at::Tensor& out) {
  const int64_t n = out.numel();
  const bool same = src.scalar_type() == out.scalar_type();
  const bool to_bf16 = src.scalar_type() == at::kFloat && out.scalar_type() == at::kBFloat16;
  if (!plain_cpu(src) || !plain_cpu(out) || src.numel() != n || !(same || to_bf16)) {
    out.copy_(src);
    return;
  }
  if (same) {
    const auto element = static_cast<int64_t>(out.element_size());
    const char* from = static_cast<const char*>(src.data_ptr());
    char* to = static_cast<char*>(out.data_ptr());
    at::parallel_for(0, n, kParallelGrain, [&](int64_t begin, int64_t end) {
      std::memcpy(to + begin * element, from + begin * element, static_cast<size_t>((end - begin) * element));
    });
    return;
  }
  const float* from = src.data_ptr<float>();
  auto* to = reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>());
  at::parallel_for(0, n, kParallelGrain,
                   [&](int64_t begin, int64_t end) { float_to_bf16(from + begin, to + begin, end - begin); });
}

}  // namespace rlcore::hybrid
