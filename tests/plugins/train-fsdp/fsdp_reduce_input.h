// The tensor rank `rank` averages in fsdp_rank_runner's `reduce` scenario, shared
// with the test that recomputes the expected means.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

namespace rlcore::testing {

// Values in (1, 1.07) on a 1/8192 grid: bf16 holds 1/128 steps there, so every
// value rounds, and the ranks' values differ.
inline at::Tensor reduce_input(int64_t rank) {
  return 1.0 + at::arange(1, 65, at::kFloat) / 1024.0 + static_cast<double>(rank + 1) / 8192.0;
}

}  // namespace rlcore::testing
