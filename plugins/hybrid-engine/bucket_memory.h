// BucketMemory: where the rollout bucket's one allocation per swap comes from.
#pragma once

#include <cstdint>
#include <memory>

#include <ATen/core/Tensor.h>

namespace rlcore::hybrid_engine {

// What happens to a CPU bucket's pages when the rollout lets go of the bucket.
//   kLazyFree: they go back to the kernel with MADV_FREE and the address range
//     stays reserved for the next swap. The kernel takes the pages whenever it
//     needs memory (they count as available, not as this process's); pages it
//     has not taken yet are written again without a fault or zero-fill.
//   kUnmap: the range is unmapped; every swap faults in fresh, zeroed pages.
enum class BucketRelease { kLazyFree, kUnmap };

// Hands out one uninitialised uint8 bucket tensor at a time. A large CPU bucket
// is its own mapping backed by transparent huge pages where the kernel allows
// them (first-touch faults on 4 KiB pages cost more than the copy into it);
// smaller buckets and other devices use at::empty. Safe to destroy while a
// bucket is alive: the bucket keeps its mapping until its last view goes.
class BucketMemory {
 public:
  explicit BucketMemory(BucketRelease release);
  BucketMemory(const BucketMemory&) = delete;
  BucketMemory& operator=(const BucketMemory&) = delete;

  at::Tensor allocate(int64_t bytes, const at::Device& device);

  struct Reserved;  // the kept range, shared with the live bucket's deleter

 private:
  BucketRelease release_;
  std::shared_ptr<Reserved> reserved_;
};

}  // namespace rlcore::hybrid_engine
