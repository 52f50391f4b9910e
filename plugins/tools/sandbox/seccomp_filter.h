// The python tool's system-call filter: a deny list compiled with libseccomp
// into the BPF program that bubblewrap installs (--seccomp FD) right before it
// execs the sandboxed program. A denied call fails with EPERM.
#pragma once

#include <string>
#include <vector>

namespace rlcore::tools {

struct SystemCall {
  std::string name;
  int number;  // on this architecture
};

// The calls refused whatever their arguments, those this architecture has.
std::vector<SystemCall> denied_system_calls();

// The filter as a BPF program (struct sock_filter[]), ready to be written to the fd bubblewrap reads.
// Denied besides the list: clone with any namespace flag, ioctl(TIOCSTI / TIOCLINUX), and clone3
// (ENOSYS: its flags sit in memory a filter cannot read, and the C library falls back to clone).
// Throws rlcore::IoError when libseccomp fails.
std::string seccomp_filter_program();

}  // namespace rlcore::tools
