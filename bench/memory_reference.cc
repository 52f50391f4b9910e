// memcpy and RSS references for the swap benchmarks.
#include "memory_reference.h"

#include <ATen/Parallel.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

namespace rlcore::bench {
namespace {

using Clock = std::chrono::steady_clock;

// 1 MiB grain, as the swap's copies split.
void parallel_memcpy(char* to, const char* from, int64_t bytes) {
  at::parallel_for(0, bytes, int64_t{1} << 20, [&](int64_t begin, int64_t end) {
    std::memcpy(to + begin, from + begin, static_cast<size_t>(end - begin));
  });
}

}  // namespace

double memcpy_gbps(int64_t bytes, int reps, bool fresh) {
  std::vector<char> from(static_cast<size_t>(bytes), 1), to(static_cast<size_t>(bytes), 0);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    if (fresh) {
      std::unique_ptr<char[]> target(new char[static_cast<size_t>(bytes)]);
      parallel_memcpy(target.get(), from.data(), bytes);
      best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
    } else {
      parallel_memcpy(to.data(), from.data(), bytes);
      best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
    }
  }
  return static_cast<double>(bytes) / best / 1e9;
}

int64_t max_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

}  // namespace rlcore::bench
