// The `local` launcher: starts N `rlcore worker` processes on this host with
// posix_spawn (never a bare fork of a process that may run torch/OpenMP threads),
// watches them, and makes sure none outlives the controller.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rlcore/export.h"

namespace rlcore::runtime {

struct LocalLaunchOptions {
  // The rlcore executable. Empty: $RLCORE_EXECUTABLE, else this process's own
  // executable (right when the controller is `rlcore` itself; a test or a
  // program embedding librlcore_core must name the rlcore binary).
  std::string executable;
  // Arguments after the executable.
  std::vector<std::string> args = {"worker"};
  std::string controller;  // endpoint the workers connect to
  std::string secret;      // handed over in RLCORE_SECRET, never on the command line
  int64_t nworkers = 1;
  // Intra-op threads per worker (at::set_num_threads, OMP_NUM_THREADS);
  // 0: threads_for_worker's default.
  int64_t threads_per_worker = 0;
  // Extra environment for every worker.
  std::map<std::string, std::string> env;
};

// A worker process that has ended and been reaped.
struct ExitedWorker {
  int64_t rank = -1;
  pid_t pid = 0;
  std::string status;  // "exited with status 1", "killed by signal 9 (Killed)"
};

RLCORE_API std::string default_worker_executable();
RLCORE_API std::string describe_wait_status(int status);
// The intra-op thread count for one of `nworkers` workers on this host:
// threads_per_worker when > 0, else an inherited OMP_NUM_THREADS (each worker
// gets what one process was given, as torchrun does), else the cores this
// process may run on (its affinity mask) divided by nworkers, at least 1.
RLCORE_API int64_t threads_for_worker(int64_t threads_per_worker, int64_t nworkers);

// Spawns from the calling thread: workers ask the kernel for SIGKILL when the
// spawning thread ends (PR_SET_PDEATHSIG), so keep that thread alive as long as
// the workers should run (the controller's main thread).
class RLCORE_API LocalLauncher {
 public:
  // Spawns every worker; throws IoError naming the executable when one cannot be
  // started (those already started are terminated).
  explicit LocalLauncher(LocalLaunchOptions options);
  // terminate() with a short grace.
  ~LocalLauncher();
  LocalLauncher(const LocalLauncher&) = delete;
  LocalLauncher& operator=(const LocalLauncher&) = delete;

  std::vector<pid_t> pids() const;  // by rank
  // Reaps workers that ended since the last call. Thread-safe.
  std::vector<ExitedWorker> poll();
  // Waits until every worker has ended, at most `limit`; true when all have.
  bool wait_all(std::chrono::milliseconds limit);
  // SIGKILL to worker `rank` if it has not ended: a worker the run counts as
  // lost (silent past the heartbeat deadline) must not linger half alive.
  void kill(int64_t rank);
  // Starts a new worker for `rank` (after killing and reaping the old one if it
  // still runs): a lost worker of a replaceable pool (PoolSpec::replaceable).
  void restart(int64_t rank);
  // SIGTERM to those still running, SIGKILL after `grace`, then reaps all of them.
  void terminate(std::chrono::milliseconds grace);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlcore::runtime
