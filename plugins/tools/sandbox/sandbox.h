// Runs a program in a sandbox (docs/agent-loop.md#the-python-tools-isolation):
// isolated, it runs under bubblewrap (bubblewrap.h) as an unprivileged uid with
// no capabilities, in namespaces of its own, behind a seccomp filter
// (seccomp_filter.h), in a cgroup of its own (cgroup.h); in every mode it runs
// under resource limits, is killed with everything it started at its wall-clock
// deadline, and its output is kept to a bound (the rest read and dropped, so it
// never blocks).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cgroup.h"

namespace rlcore::tools {

struct SandboxLimits {
  double cpu_seconds = 5.0;  // per process (RLIMIT_CPU)
  double wall_seconds = 10.0;
  int64_t memory_mb = 512;       // per process (RLIMIT_AS) and, isolated, of the whole call (its cgroup)
  int64_t file_size_mb = 16;     // largest file it may write
  int64_t max_processes = 16;    // threads count too; isolated: the call's cgroup, else RLIMIT_NPROC
  int64_t max_open_files = 256;  // per process
  double cpu_cores = 1.0;        // isolated: CPU bandwidth of the call; 0: unbounded
  int64_t output_bytes = 65536;  // of stdout and of stderr, each
};

struct SandboxResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  bool timed_out = false;            // the wall-clock deadline killed it
  bool memory_exhausted = false;     // the call's cgroup ran out of memory (isolated only)
  bool processes_exhausted = false;  // a fork was refused at max_processes (isolated only)
  bool output_truncated = false;
  std::string out;
  std::string err;
};

struct IsolationSettings {
  std::string cgroup_parent;           // under each cgroup mount; empty: rlcore-sandbox
  std::vector<std::string> read_only;  // host paths the program needs besides /usr (an interpreter's prefix)
};

class Sandbox {
 public:
  // Everything isolation needs, found and checked now. Throws rlcore::IoError
  // naming what is missing (bwrap, seccomp, a writable cgroup, the nobody user).
  static Sandbox isolated(const IsolationSettings& settings);
  // Resource limits only: the network and the files are open to the program.
  static Sandbox limits_only();

  bool isolating() const { return isolation_ != nullptr; }
  // The uid and gid the program runs as when that is not this process's (root drops to nobody).
  std::optional<std::pair<uid_t, gid_t>> drops_to() const;

  // Runs argv (argv[0] an absolute path) in `scratch_dir`, an existing directory the program's uid
  // may read. Isolated, the program sees there a tmpfs of half of memory_mb, its only writable
  // place, with the directory's files read-only in it; otherwise it writes the directory itself.
  // Throws rlcore::IoError when it cannot start.
  SandboxResult run(const std::vector<std::string>& argv, const std::string& scratch_dir,
                    const SandboxLimits& limits) const;

 private:
  struct Isolation;
  std::shared_ptr<const Isolation> isolation_;
};

}  // namespace rlcore::tools
