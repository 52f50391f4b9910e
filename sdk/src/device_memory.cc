// Measured memory per device: the CUDA caching allocator's statistics, or on
// the CPU the process's resident set from /proc/self (see rlcore/device.h).
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "device/backend.h"
#include "rlcore/device.h"

namespace rlcore {
namespace {

// A "Name:   1234 kB" line of a /proc file, in bytes; 0 when the file or the
// field is missing (smaps_rollup needs Linux 4.14, LazyFree 4.12).
int64_t proc_kb_field(const char* path, const std::string& field) {
  std::ifstream in(path);
  std::string line;
  const std::string prefix = field + ":";
  while (std::getline(in, line)) {
    if (line.compare(0, prefix.size(), prefix) != 0) continue;
    std::istringstream value(line.substr(prefix.size()));
    int64_t kb = 0;
    value >> kb;
    return kb * 1024;
  }
  return 0;
}

int64_t cuda_index(const at::Device& device) { return device.has_index() ? device.index() : 0; }

// The peak alone: on the CPU /proc/self/status is cheap to read, while
// smaps_rollup (for LazyFree) walks the page tables (about 10 ms per GB).
int64_t peak_allocated(const at::Device& device) {
  if (device.is_cuda()) return device_backend::allocator_stats(cuda_index(device)).peak_allocated;
  return proc_kb_field("/proc/self/status", "VmHWM");
}

}  // namespace

DeviceMemoryStats device_memory_stats(const at::Device& device) {
  DeviceMemoryStats stats;
  if (device.is_cuda()) {
    const device_backend::AllocatorStats allocator = device_backend::allocator_stats(cuda_index(device));
    stats.allocated = allocator.allocated;
    stats.reserved = allocator.reserved;
    stats.peak_allocated = allocator.peak_allocated;
    return stats;
  }
  stats.reserved = process_rss_bytes();
  stats.peak_allocated = proc_kb_field("/proc/self/status", "VmHWM");
  stats.allocated = stats.reserved - proc_kb_field("/proc/self/smaps_rollup", "LazyFree");
  return stats;
}

int64_t process_rss_bytes() { return proc_kb_field("/proc/self/status", "VmRSS"); }

int64_t host_memory_used_bytes() {
  return proc_kb_field("/proc/meminfo", "MemTotal") - proc_kb_field("/proc/meminfo", "MemAvailable");
}

bool reset_peak_memory(const at::Device& device) {
  if (device.is_cuda()) {
    device_backend::reset_peak(cuda_index(device));
    return true;
  }
  // "5" resets VmHWM to VmRSS (Linux 4.0+, proc(5)); containers may forbid the write.
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool written = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return written;
}

void release_cached_memory(const at::Device& device) {
  if (device.is_cuda()) {
    device_backend::empty_cache();
    return;
  }
  ::malloc_trim(0);
}

PeakMemoryMeter::PeakMemoryMeter(const at::Device& device) : device_(device) {
  per_phase_ = reset_peak_memory(device_);
  baseline_ = device_memory_stats(device_).allocated;
}

int64_t PeakMemoryMeter::peak_above_start() const { return std::max<int64_t>(0, peak_allocated(device_) - baseline_); }

}  // namespace rlcore
