// Runs a program in a sandbox: its own network namespace (no interfaces up:
// no network at all), its own mount namespace with every mount read-only but
// one scratch directory, resource limits (CPU time, memory, file size,
// processes), a wall-clock deadline that kills its whole process group, and
// output kept to a bound (the rest read and dropped, so it never blocks).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rlcore::tools {

struct SandboxLimits {
  double cpu_seconds = 5.0;
  double wall_seconds = 10.0;
  int64_t memory_mb = 512;       // address space
  int64_t file_size_mb = 16;     // largest file it may write
  int64_t max_processes = 16;    // threads count too
  int64_t output_bytes = 65536;  // of stdout and of stderr, each
};

struct SandboxResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  bool timed_out = false;  // the wall-clock deadline killed it
  bool output_truncated = false;
  std::string out;
  std::string err;
};

// Whether this process may create the namespaces (tried once in a child); when
// not, `why` says what failed.
bool sandbox_available(std::string* why);

// Runs argv (argv[0] an absolute path) in `scratch_dir` (an existing
// directory, its only writable place) with `isolate` namespaces or, when
// false, limits only. Throws rlcore::IoError when it cannot start.
SandboxResult run_sandboxed(const std::vector<std::string>& argv, const std::string& scratch_dir,
                            const SandboxLimits& limits, bool isolate);

}  // namespace rlcore::tools
