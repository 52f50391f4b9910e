// Private to the model library: the per-output recipe of exact_linear.h, for
// one dot product (the attention's scores use it too).
#pragma once

#include <cmath>
#include <cstdint>

namespace rlcore::model::exact {

inline constexpr int64_t kLanes = 16;

// The recipe's lane sum: l + 8, then + 4, + 2, + 1.
inline float sum_lanes(float lanes[kLanes]) {
  for (int64_t width = kLanes / 2; width >= 1; width /= 2) {
    for (int64_t l = 0; l < width; ++l) lanes[l] = lanes[l] + lanes[l + width];
  }
  return lanes[0];
}

// sum_k a[k] * b[k] by the recipe: 16 lanes of fused multiply-adds in ascending k, then the lane sum.
inline float dot(const float* a, const float* b, int64_t n) {
  float lanes[kLanes] = {};
  for (int64_t k = 0; k < n; ++k) lanes[k % kLanes] = std::fma(a[k], b[k], lanes[k % kLanes]);
  return sum_lanes(lanes);
}

}  // namespace rlcore::model::exact
