// Which CPU kernels a decode step runs. The decode GEMV (fp32 and bf16) and the
// decode-step attention have AVX-512 versions, chosen by the CPU's flags; on a
// CPU without them, or when told to, the model runs the portable ATen ops.
// Every call a kernel could take is counted by the path it took, so a test or
// a benchmark can say which one ran instead of assuming it.
#pragma once

#include <cstdint>
#include <string>

namespace rlcore::model {

// What this CPU offers the kernels (cpuid, read once).
struct CpuKernelSupport {
  bool avx512 = false;       // avx512f and avx512bw: fp32 GEMV, attention
  bool avx512_bf16 = false;  // plus avx512bf16: bf16 GEMV
};
CpuKernelSupport cpu_kernel_support();

enum class CpuKernel { kGemvFloat, kGemvBFloat16, kDecodeAttention, kExactLinear };  // exact_linear.h
enum class CpuKernelPath { kAvx512, kAten };

// The path a call whose inputs the kernel accepts takes now: AVX-512 where the
// CPU has what it needs and generic is not forced, else ATen.
CpuKernelPath cpu_kernel_path(CpuKernel kernel);

// Calls since the process started whose inputs the kernel accepts, by the path
// they took: its AVX-512 version, or the ATen ops (no support, or generic forced).
struct CpuKernelCounts {
  int64_t avx512 = 0;
  int64_t aten = 0;
};
CpuKernelCounts cpu_kernel_counts(CpuKernel kernel);

// true: every kernel takes the ATen path, whatever the CPU (to compare the two
// paths, or to rule the fast one out). Process-wide. The start value comes from
// RLCORE_CPU_KERNELS, read once: `generic`, or `auto`/unset (the CPU decides);
// anything else is a ConfigError, thrown by the first of these calls.
void set_generic_cpu_kernels(bool generic);
bool generic_cpu_kernels();

// One line for a log: each kernel's path now, and why (the CPU's flags or the
// forced generic path), e.g. "fp32 GEMV AVX-512, bf16 GEMV ATen (no avx512_bf16), ...".
std::string describe_cpu_kernels();

// Forces the generic (ATen) path, or the CPU's choice, for a scope, and puts
// back what was there before: for tests that compare the two paths.
class ScopedGenericCpuKernels {
 public:
  explicit ScopedGenericCpuKernels(bool generic = true) : previous_(generic_cpu_kernels()) {
    set_generic_cpu_kernels(generic);
  }
  ~ScopedGenericCpuKernels() { set_generic_cpu_kernels(previous_); }
  ScopedGenericCpuKernels(const ScopedGenericCpuKernels&) = delete;
  ScopedGenericCpuKernels& operator=(const ScopedGenericCpuKernels&) = delete;

 private:
  bool previous_;
};

}  // namespace rlcore::model
