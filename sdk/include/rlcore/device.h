// Devices: which one a worker runs on (trainer.device, serve/export --device)
// and how much memory it uses, measured (the CUDA caching allocator's
// statistics; on the CPU the process's resident set from /proc/self).
// The only place engines and the core learn whether this build has CUDA.
#pragma once

#include <cstdint>
#include <string>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "rlcore/export.h"

namespace rlcore {

// True when this build of rlcore was compiled against a CUDA libtorch.
RLCORE_API bool cuda_build();
// GPUs this process can see: 0 in the CPU build or when none is visible.
RLCORE_API int64_t cuda_device_count();

// The device `requested` names, for a worker with `local_rank`:
//   auto      cuda:<local_rank> when this build has CUDA and a GPU is visible, else cpu
//   cpu       cpu
//   cuda      cuda:<local_rank>, or cuda:0 when this process sees one GPU only
//             (a launcher that gives each worker its own, e.g. srun --gpus-per-task 1)
//   cuda:N    cuda:N
// A CUDA device is also made the current one (c10::cuda::set_device). Throws
// ConfigError naming `key` when the build has no CUDA, no GPU is visible, the
// index is past the GPUs visible, or the string is none of the above.
RLCORE_API at::Device resolve_device(const std::string& requested, int64_t local_rank,
                                     const std::string& key = "device");

// The same rules without binding anything, for the controller: throws when
// `workers` processes on this host, local ranks 0..workers-1, could not each
// get the device `requested` names (e.g. more workers than visible GPUs).
RLCORE_API void check_device_slots(const std::string& requested, int64_t workers, const std::string& key,
                                   const std::string& workers_key);

// Throws ConfigError naming `key` and the GPU when `device` cannot compute in
// `dtype` (bfloat16 needs compute capability 8.0 or newer).
RLCORE_API void check_dtype_supported(const at::Device& device, at::ScalarType dtype, const std::string& key);

// Memory of one device, in bytes.
//   CUDA: the caching allocator's aggregate statistics.
//   CPU:  the process's resident set: allocated = VmRSS less the lazily freed
//         (MADV_FREE) pages the kernel may take back at any time; reserved =
//         VmRSS; peak_allocated = VmHWM, the resident high-water mark, which
//         counts lazily freed pages too.
struct DeviceMemoryStats {
  int64_t allocated = 0;
  int64_t reserved = 0;
  int64_t peak_allocated = 0;  // since the last reset_peak_memory() that returned true
};

// CPU: reads /proc/self/smaps_rollup, which walks the page tables (about
// 10 ms per GB resident): once per phase, not in a loop.
RLCORE_API DeviceMemoryStats device_memory_stats(const at::Device& device);

// Starts a new peak at the current use. CUDA: resetPeakStats. CPU: writes "5"
// to /proc/self/clear_refs (VmHWM := VmRSS); returns false when that is not
// permitted, so the caller can say its peak is not per phase.
RLCORE_API bool reset_peak_memory(const at::Device& device);

// Host memory, whatever the device: this process's resident set (VmRSS) and
// the machine's memory in use (MemTotal - MemAvailable), in bytes.
RLCORE_API int64_t process_rss_bytes();
RLCORE_API int64_t host_memory_used_bytes();

// Gives cached, unused memory back: CUDA emptyCache; CPU malloc_trim.
RLCORE_API void release_cached_memory(const at::Device& device);

// The peak memory use during a phase above the use when it began:
//   PeakMemoryMeter meter(device);  // resets the peak, notes the baseline
//   ... the phase ...
//   meter.peak_above_start();
// CPU: the baseline leaves out lazily freed pages, so reusing them (a bucket
// kept with MADV_FREE) counts as new use, as it is; but VmHWM cannot tell them
// apart, so lazily freed pages the phase never touches count too: on the CPU
// the figure is an upper bound, exact when there were none at the start.
class RLCORE_API PeakMemoryMeter {
 public:
  explicit PeakMemoryMeter(const at::Device& device);
  int64_t peak_above_start() const;
  // False when the peak could not be reset: the figure is then the peak since
  // the process started (or the last successful reset) above the baseline.
  bool per_phase() const { return per_phase_; }

 private:
  at::Device device_;
  int64_t baseline_ = 0;
  bool per_phase_ = true;
};

}  // namespace rlcore
