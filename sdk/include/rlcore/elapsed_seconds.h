// seconds_since(): the wall time since a steady_clock time point, as a double,
// the unit of every timing_s/ metric and swap phase.
#pragma once

#include <chrono>

namespace rlcore {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace rlcore
