// CPU bucket memory: mmap with MADV_HUGEPAGE, released with MADV_FREE or munmap.
#include "bucket_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include <ATen/ATen.h>

#include "rlcore/error.h"

namespace rlcore::hybrid_engine {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
// glibc's largest dynamic mmap threshold: a smaller bucket comes from the heap
// and reuses the previous swap's pages there, a larger one is a fresh mapping
// (page faults on every swap) unless its range is kept.
constexpr int64_t kOwnMappingBytes = int64_t{32} << 20;

size_t page_rounded(size_t bytes) { return (bytes + 4095) & ~size_t{4095}; }

// Maps `bytes` starting on a huge-page boundary (a huge page needs an aligned
// virtual range): over-reserve address space by one huge page, trim both ends.
void* map_aligned(size_t bytes) {
  const size_t reserved = bytes + kHugePage;
  void* raw = mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    throw Error("sharding_manager: cannot map a " + std::to_string(bytes) +
                "-byte rollout bucket: " + std::strerror(errno));
  }
  const auto begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (begin + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > begin) munmap(raw, aligned - begin);
  const uintptr_t end = begin + reserved;
  const uintptr_t used_end = aligned + page_rounded(bytes);
  if (end > used_end) munmap(reinterpret_cast<void*>(used_end), end - used_end);
  // Advice only: without THP the mapping works with small pages.
  madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

// A bucket in a mapping of its own, unmapped with its last view.
at::Tensor mapped_bucket(int64_t bytes, const at::TensorOptions& options) {
  const auto size = static_cast<size_t>(bytes);
  return at::from_blob(
      map_aligned(size), {bytes}, [size](void* p) { munmap(p, page_rounded(size)); }, options);
}

}  // namespace

// One kept range, unmapped by whichever of the BucketMemory and the live
// bucket's deleter lets go last. `in_use` is true while a bucket views it.
struct BucketMemory::Reserved {
  std::mutex mutex;
  void* data = nullptr;
  size_t bytes = 0;
  bool in_use = false;

  ~Reserved() {
    if (data != nullptr) munmap(data, page_rounded(bytes));
  }
};

BucketMemory::BucketMemory(BucketRelease release) : release_(release), reserved_(std::make_shared<Reserved>()) {}

at::Tensor BucketMemory::allocate(int64_t bytes, const at::Device& device) {
  const at::TensorOptions options = at::TensorOptions().dtype(at::kByte).device(device);
  if (!device.is_cpu() || bytes < kOwnMappingBytes) return at::empty({bytes}, options);
  if (release_ == BucketRelease::kUnmap) return mapped_bucket(bytes, options);
  const auto size = static_cast<size_t>(bytes);
  std::shared_ptr<Reserved> reserved = reserved_;
  {
    std::lock_guard<std::mutex> lock(reserved->mutex);
    // A second live bucket (never the case in the managers' swaps) gets its own range.
    if (reserved->in_use) return mapped_bucket(bytes, options);
    if (reserved->bytes != size) {
      if (reserved->data != nullptr) munmap(reserved->data, page_rounded(reserved->bytes));
      reserved->data = nullptr;  // stays null if the new mapping fails
      reserved->data = map_aligned(size);
      reserved->bytes = size;
    }
    reserved->in_use = true;
  }
  // The deleter holds the range alive: the bucket may outlive this object.
  return at::from_blob(
      reserved->data, {bytes},
      [reserved](void*) {
        std::lock_guard<std::mutex> lock(reserved->mutex);
        reserved->in_use = false;
        // The contents are dead; the kernel may reclaim the pages from now on
        // (kernels before 4.5 have no MADV_FREE: free them at once instead).
        if (madvise(reserved->data, reserved->bytes, MADV_FREE) != 0) {
          madvise(reserved->data, reserved->bytes, MADV_DONTNEED);
        }
      },
      options);
}

}  // namespace rlcore::hybrid_engine
