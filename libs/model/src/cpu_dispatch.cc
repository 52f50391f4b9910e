// The CPU kernels' support, path counters and the generic switch (see
// rlcore/model/cpu_kernels.h and model_cpu_dispatch.h).
#include "cpu_dispatch.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <string>
#include <tuple>

#include "rlcore/error.h"

namespace rlcore::model {
namespace {

// Process-wide by nature: the CPU and the kernels are shared by every model.
std::array<std::atomic<int64_t>, 4> avx512_calls{};
std::array<std::atomic<int64_t>, 4> aten_calls{};

std::size_t slot(CpuKernel kernel) { return static_cast<std::size_t>(kernel); }

// RLCORE_CPU_KERNELS, parsed on first use; set_generic_cpu_kernels overrides it.
std::atomic<bool>& generic_flag() {
  static std::atomic<bool> generic{[] {
    const char* text = std::getenv("RLCORE_CPU_KERNELS");
    const std::string value = text == nullptr ? "" : text;
    if (value.empty() || value == "auto") return false;
    if (value == "generic") return true;
    throw ConfigError("RLCORE_CPU_KERNELS='" + value +
                      "': expected 'auto' (the CPU's flags choose) or 'generic' (ATen)");
  }()};
  return generic;
}

bool supported(CpuKernel kernel) {
  const CpuKernelSupport support = cpu_kernel_support();
  return kernel == CpuKernel::kGemvBFloat16 ? support.avx512_bf16 : support.avx512;
}

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

CpuKernelPath cpu_kernel_path(CpuKernel kernel) {
  return supported(kernel) && !generic_cpu_kernels() ? CpuKernelPath::kAvx512 : CpuKernelPath::kAten;
}

CpuKernelCounts cpu_kernel_counts(CpuKernel kernel) {
  return CpuKernelCounts{avx512_calls[slot(kernel)].load(), aten_calls[slot(kernel)].load()};
}

void set_generic_cpu_kernels(bool value) { generic_flag() = value; }

bool generic_cpu_kernels() { return generic_flag(); }

std::string describe_cpu_kernels() {
  std::string line;
  for (const auto& [kernel, name, needs] :
       {std::tuple{CpuKernel::kGemvFloat, "fp32 GEMV", "avx512f+avx512bw"},
        std::tuple{CpuKernel::kGemvBFloat16, "bf16 GEMV", "avx512f+avx512bw+avx512_bf16"},
        std::tuple{CpuKernel::kDecodeAttention, "decode attention", "avx512f+avx512bw"},
        std::tuple{CpuKernel::kExactLinear, "exact linear", "avx512f+avx512bw"}}) {
    if (!line.empty()) line += ", ";
    line += name;
    if (cpu_kernel_path(kernel) == CpuKernelPath::kAvx512) {
      line += " AVX-512";
    } else {
      // The exact linear layer's generic path is its portable recipe, not an ATen op.
      const std::string generic = kernel == CpuKernel::kExactLinear ? " portable" : " ATen";
      line += generic_cpu_kernels() ? generic + " (generic forced)" : generic + " (no " + needs + ")";
    }
  }
  return line;
}

namespace cpu {

bool take_avx512_path(CpuKernel kernel) {
  const bool fast = cpu_kernel_path(kernel) == CpuKernelPath::kAvx512;
  (fast ? avx512_calls : aten_calls)[slot(kernel)].fetch_add(1, std::memory_order_relaxed);
  return fast;
}

}  // namespace cpu
}  // namespace rlcore::model
