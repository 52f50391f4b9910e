// Worker-runtime benchmark: round-trip latency of an empty call to 1, 2 and 4
// local workers, and the throughput of a 64 MiB Batch sent controller -> workers
// -> controller (dp_compute echo) next to raw loopback TCP measured in the same run.
//   build/bin/bench_runtime [--iterations N] [--mib M]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include "rlcore/core/runtime/cluster.h"
#include "rlcore/elapsed_seconds.h"
#include "../tests/common/test_paths.h"

using Clock = std::chrono::steady_clock;
using rlcore::seconds_since;

namespace {

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1));
  return values[index];
}

// GB/s of `bytes` pushed through one loopback TCP connection in 1 MiB writes.
double loopback_tcp_gbps(std::size_t bytes) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  ::listen(listener, 1);
  std::thread sender([&] {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    std::vector<char> chunk(1 << 20, 'x');
    std::size_t sent = 0;
    while (sent < bytes) {
      const ssize_t n = ::send(fd, chunk.data(), std::min(chunk.size(), bytes - sent), 0);
      if (n <= 0) break;
      sent += static_cast<std::size_t>(n);
    }
    ::close(fd);
  });
  const int fd = ::accept(listener, nullptr, nullptr);
  std::vector<char> buffer(1 << 20);
  std::size_t received = 0;
  const auto start = Clock::now();
  for (;;) {
    const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
    if (n <= 0) break;
    received += static_cast<std::size_t>(n);
  }
  const double elapsed = seconds_since(start);
  sender.join();
  ::close(fd);
  ::close(listener);
  return static_cast<double>(received) / elapsed / 1e9;
}

rlcore::runtime::ClusterOptions options_for(int64_t workers) {
  rlcore::runtime::ClusterOptions options;
  options.worker_executable = rlcore_test::rlcore_executable();
  options.worker_args = {"--log-level", "warn"};
  options.process_groups = false;
  rlcore::runtime::PoolSpec pool;
  pool.nodes = {workers};
  pool.roles = {rlcore::runtime::RoleSpec{"diag", "diag", nlohmann::json::object()}};
  pool.threads_per_worker = 1;
  options.pools = {pool};
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 300;
  int64_t mib = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--iterations") == 0) iterations = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--mib") == 0) mib = std::atoll(argv[i + 1]);
  }
  spdlog::set_level(spdlog::level::warn);
  const std::size_t bytes = static_cast<std::size_t>(mib) << 20;
  const double tcp = loopback_tcp_gbps(4 * bytes);

  // 64 MiB of float32 rows, 4 KiB each.
  const int64_t columns = 1024;
  rlcore::Batch batch(static_cast<int64_t>(bytes / (columns * 4)));
  batch.set("x", at::rand({batch.size(), columns}));

  std::printf("worker runtime: %d empty calls per row; %lld MiB Batch, dp_compute echo (sent + returned)\n", iterations,
              static_cast<long long>(mib));
  std::printf("loopback TCP, one connection: %.2f GB/s\n\n", tcp);
  std::printf(
      "| workers | empty call p50 (us) | p99 (us) | mean (us) | %lld MiB round trip (ms) | Batch GB/s | vs TCP |\n",
      static_cast<long long>(mib));
  std::printf("|---|---|---|---|---|---|---|\n");
  for (int64_t workers : {1, 2, 4}) {
    rlcore::runtime::Cluster cluster(options_for(workers));
    rlcore::runtime::WorkerGroup& group = cluster.group("global");
    for (int i = 0; i < 20; ++i) group.call("diag.noop").get();
    std::vector<double> latencies;
    for (int i = 0; i < iterations; ++i) {
      const auto start = Clock::now();
      group.call("diag.noop").get();
      latencies.push_back(seconds_since(start) * 1e6);
    }
    double mean = 0;
    for (double value : latencies) mean += value / static_cast<double>(latencies.size());

    group.call("diag.echo_dp", batch).get();  // warm-up
    const int rounds = 5;
    double best = 1e9;
    for (int i = 0; i < rounds; ++i) {
      const auto start = Clock::now();
      const rlcore::runtime::CallOutput output = group.call("diag.echo_dp", batch).get();
      best = std::min(best, seconds_since(start));
      if (output.batch.size() != batch.size()) {
        std::fprintf(stderr, "echo returned %lld rows, expected %lld\n", static_cast<long long>(output.batch.size()),
                     static_cast<long long>(batch.size()));
        return 1;
      }
    }
    const double gbps = 2.0 * static_cast<double>(bytes) / best / 1e9;
    std::printf("| %lld | %.0f | %.0f | %.0f | %.1f | %.2f | %.2f |\n", static_cast<long long>(workers),
                percentile(latencies, 0.5), percentile(latencies, 0.99), mean, best * 1e3, gbps, gbps / tcp);
    cluster.shutdown();
  }
  return 0;
}
