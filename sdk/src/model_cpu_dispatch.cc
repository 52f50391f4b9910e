// The CPU kernels' support, path counters and the generic switch (see
// rlcore/model/cpu_kernels.h and model_cpu_dispatch.h).
#include "model_cpu_dispatch.h"

#include <array>
#include <atomic>

namespace rlcore::model {
namespace {

// Process-wide by nature: the CPU and the kernels are shared by every model.
std::atomic<bool> generic{false};
std::array<std::atomic<int64_t>, 3> avx512_calls{};
std::array<std::atomic<int64_t>, 3> aten_calls{};

std::size_t slot(CpuKernel kernel) { return static_cast<std::size_t>(kernel); }

}  // namespace

CpuKernelSupport cpu_kernel_support() {
#if defined(__x86_64__)
  static const CpuKernelSupport support = [] {
    CpuKernelSupport s;
    s.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    s.avx512_bf16 = s.avx512 && __builtin_cpu_supports("avx512bf16");
    return s;
  }();
  return support;
#else
  return {};
#endif
}

CpuKernelCounts cpu_kernel_counts(CpuKernel kernel) {
  return CpuKernelCounts{avx512_calls[slot(kernel)].load(), aten_calls[slot(kernel)].load()};
}

void set_generic_cpu_kernels(bool value) { generic = value; }

bool generic_cpu_kernels() { return generic; }

namespace cpu {

bool take_avx512_path(CpuKernel kernel, bool supported) {
  const bool fast = supported && !generic;
  (fast ? avx512_calls : aten_calls)[slot(kernel)].fetch_add(1, std::memory_order_relaxed);
  return fast;
}

}  // namespace cpu
}  // namespace rlcore::model
