// allocate_bucket: the rollout bucket's one allocation per swap.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace rlcore::hybrid {

// An uninitialised uint8 tensor of `bytes` on `device`. A large CPU bucket is
// its own mapping backed by transparent huge pages where the kernel allows them
// (madvise): it is fresh memory every swap, and first-touch faults on 4 KiB
// pages cost more than the copy into it. Freed (unmapped) with its last view.
at::Tensor allocate_bucket(int64_t bytes, const at::Device& device);

}  // namespace rlcore::hybrid
