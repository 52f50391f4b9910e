// The command line of bubblewrap (bwrap, Flatpak's sandbox) that runs one call:
// new user, PID, network, IPC, UTS and cgroup namespaces, no capabilities,
// no further user namespaces, a root of its own with /usr and the
// interpreter read-only, a fresh /proc, a minimal /dev, the scratch directory
// the one writable place, and the seccomp filter installed before exec.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rlcore::tools {

struct BubblewrapPlan {
  std::string bubblewrap;  // the bwrap executable
  std::vector<std::string>
      read_only;  // host paths shown read-only at the same place, besides /usr and /etc's few files
  // The working directory: a tmpfs of scratch_bytes at the host directory's path (counted in the
  // call's memory, gone with it: nothing the code writes reaches the host's disk), into which the
  // files the host directory holds (the program) are bound read-only.
  std::string scratch;
  std::vector<std::string> scratch_files;  // names of the files in it
  int64_t scratch_bytes = 256 << 20;
  int seccomp_fd = -1;               // the BPF program (seccomp_filter.h), open in the process that execs bwrap
  int64_t shm_bytes = 64 << 20;      // the size of its private /dev/shm
  std::vector<std::string> command;  // argv, argv[0] an absolute path
};

std::vector<std::string> bubblewrap_argv(const BubblewrapPlan& plan);

// The bwrap executable in PATH (or the usual places); empty when there is none.
std::string find_bubblewrap();

}  // namespace rlcore::tools
