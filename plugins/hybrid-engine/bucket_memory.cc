// CPU bucket memory from mmap with MADV_HUGEPAGE; other devices use at::empty.
#include "bucket_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <ATen/ATen.h>

#include "rlcore/error.h"

namespace rlcore::hybrid {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
// glibc's largest dynamic mmap threshold: a smaller bucket comes from the heap
// and reuses the previous swap's pages there, a larger one is a fresh mapping
// (page faults on every swap) whichever way it is allocated.
constexpr int64_t kOwnMappingBytes = int64_t{32} << 20;

// Maps `bytes` starting on a huge-page boundary (a huge page needs an aligned
// virtual range): over-reserve address space by one huge page, trim both ends.
void* map_aligned(size_t bytes) {
  const size_t reserved = bytes + kHugePage;
  void* raw = mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    throw Error("sharding_manager: cannot map a " + std::to_string(bytes) + "-byte rollout bucket: " +
                       std::strerror(errno));
  }
  const auto begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > begin) munmap(raw, aligned - begin);
  const uintptr_t end = begin + reserved;
  const uintptr_t used_end = aligned + ((bytes + 4095) & ~size_t{4095});
  if (end > used_end) munmap(reinterpret_cast<void*>(used_end), end - used_end);
  // Advice only: without THP the mapping works with small pages.
  madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

}  // namespace

at::Tensor allocate_bucket(int64_t bytes, const at::Device& device) {
  const at::TensorOptions options = at::TensorOptions().dtype(at::kByte).device(device);
  if (!device.is_cpu() || bytes < kOwnMappingBytes) return at::empty({bytes}, options);
  void* data = map_aligned(static_cast<size_t>(bytes));
  return at::from_blob(
      data, {bytes}, [bytes](void* p) { munmap(p, static_cast<size_t>(bytes)); }, options);
}

}  // namespace rlcore::hybrid
