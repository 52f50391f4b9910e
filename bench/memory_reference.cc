// memcpy, read and RSS references for the benchmarks.
#include "memory_reference.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
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

// Four independent sums, so the loads, not the adds, set the pace.
uint64_t sum_words(const uint64_t* words, int64_t count) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  int64_t i = 0;
  for (; i + 4 <= count; i += 4) {
    a += words[i];
    b += words[i + 1];
    c += words[i + 2];
    d += words[i + 3];
  }
  for (; i < count; ++i) a += words[i];
  return a + b + c + d;
}

}  // namespace

double read_gbps(int64_t bytes, int reps) {
  const int64_t count = bytes / 8;
  std::vector<uint64_t> words(static_cast<size_t>(count), 1);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    std::atomic<uint64_t> total{0};
    const auto start = Clock::now();
    at::parallel_for(0, count, int64_t{1} << 17,
                     [&](int64_t begin, int64_t end) { total += sum_words(words.data() + begin, end - begin); });
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
    if (total.load() != static_cast<uint64_t>(count)) throw std::logic_error("read_gbps: wrong sum");
  }
  return static_cast<double>(count * 8) / best / 1e9;
}

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

void wait_for_device(const at::Device& device) {
  // A one-element copy to the host is ordered after everything queued before
  // it and blocks until it lands: a synchronize without device-specific APIs.
  if (!device.is_cpu()) (void)at::empty({1}, at::TensorOptions().device(device)).cpu();
}

double device_copy_gbps(int64_t bytes, int reps, const at::Device& device) {
  const at::TensorOptions options = at::TensorOptions().dtype(at::kByte).device(device);
  const at::Tensor from = at::ones({bytes}, options);
  at::Tensor to = at::empty({bytes}, options);
  to.copy_(from);  // warm-up
  wait_for_device(device);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    to.copy_(from);
    wait_for_device(device);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return static_cast<double>(bytes) / best / 1e9;
}

}  // namespace rlcore::bench
