// What the multi-process benchmarks share: timing a step (best of N, to the
// device's completion), the peak and current RSS of this process, a rank's
// loopback process groups, and running this executable once per rank with
// OpenMP / OpenBLAS threads set.
#pragma once

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "rlcore/comm_context.h"
#include "rlcore/core/runtime/process_groups.h"
#include "rlcore/error.h"

extern char** environ;

namespace rlcore::bench {

// This process's peak resident set (MB) since it started.
inline double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// Restarts this process's peak resident set (Linux's VmHWM, read by
// peak_since_reset_mb()) at its current resident set.
inline void reset_peak_rss() {
  if (FILE* refs = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", refs);
    std::fclose(refs);
  }
}

// This process's peak resident set (MB) since reset_peak_rss() (or since it started).
inline double peak_since_reset_mb() {
  double kb = 0;
  if (FILE* status = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), status) != nullptr) {
      if (std::sscanf(line, "VmHWM: %lf kB", &kb) == 1) break;
    }
    std::fclose(status);
  }
  return kb / 1024.0;
}

// This process's resident set (MB) now.
inline double current_rss_mb() {
  long pages = 0;
  long resident = 0;
  if (FILE* statm = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(statm, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(statm);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

// Returns once the work queued on `device`'s current stream is done.
inline void wait_for(const at::Device& device) {
  if (device.is_cpu()) return;
  const auto& impl = *c10::impl::getDeviceGuardImpl(device.type());
  impl.synchronizeStream(impl.getStream(device));
}

// Runs `step` once to warm up, then `steps` times; the fastest step's seconds
// (the machine is shared, so the minimum is the least disturbed measurement).
template <class Step>
double time_steps(int64_t steps, const at::Device& device, Step step) {
  using Clock = std::chrono::steady_clock;
  step();
  wait_for(device);
  double best = std::numeric_limits<double>::infinity();
  for (int64_t s = 0; s < steps; ++s) {
    const auto start = Clock::now();
    step();
    wait_for(device);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

// This process's environment with the thread counts of OpenMP and OpenBLAS set
// to `threads` (OpenBLAS reads them when it loads, before main).
inline std::vector<std::string> environment_with_threads(int threads) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("OMP_NUM_THREADS=", 0) != 0 && entry.rfind("OPENBLAS_NUM_THREADS=", 0) != 0) env.push_back(entry);
  }
  env.push_back("OMP_NUM_THREADS=" + std::to_string(threads));
  env.push_back("OPENBLAS_NUM_THREADS=" + std::to_string(threads));
  return env;
}

// One rank's process groups over loopback, rendezvousing at 127.0.0.1:`port`.
inline std::unique_ptr<CommContext> loopback_comm(int port, const std::string& prefix, int64_t rank, int64_t world,
                                                  runtime::MeshShape mesh = {}) {
  runtime::ProcessGroupOptions pg;
  pg.store_host = "127.0.0.1";
  pg.store_port = port;
  pg.prefix = prefix;
  pg.rank = rank;
  pg.world_size = world;
  pg.local_address = "127.0.0.1";
  pg.mesh = std::move(mesh);
  return runtime::make_comm_context(pg);
}

// Runs `self` once per argument list (argv[1..]), all at once with `threads`
// threads each, and waits for them; Error naming `what` when one fails.
inline void run_processes(const std::string& self, const std::vector<std::vector<std::string>>& args, int threads,
                          const std::string& what) {
  std::vector<std::string> env = environment_with_threads(threads);
  const auto as_argv = [](std::vector<std::string>& strings) {
    std::vector<char*> raw;
    for (auto& s : strings) raw.push_back(s.data());
    raw.push_back(nullptr);
    return raw;
  };
  std::vector<pid_t> pids;
  for (const std::vector<std::string>& tail : args) {
    std::vector<std::string> argv = {self};
    argv.insert(argv.end(), tail.begin(), tail.end());
    std::vector<char*> raw = as_argv(argv);
    std::vector<char*> raw_env = as_argv(env);
    pid_t pid = 0;
    if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, raw.data(), raw_env.data()) != 0)
      throw IoError(what + ": cannot spawn " + self);
    pids.push_back(pid);
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    ::waitpid(pids[i], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw Error(what + ": process " + std::to_string(i) + " of " + std::to_string(pids.size()) + " failed");
  }
}

}  // namespace rlcore::bench
