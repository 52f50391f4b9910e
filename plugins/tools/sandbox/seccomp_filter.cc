// The system-call filter (see seccomp_filter.h). A deny list, not an allow
// list: the interpreter and whatever native libraries the code imports need a
// wide and changing set of calls, while the boundary itself is the namespaces,
// the unprivileged uid without capabilities and the cgroup; the filter closes
// the kernel surfaces that boundary leaves reachable (docs/decisions/0014).
#include "seccomp_filter.h"

#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "rlcore/error.h"

namespace rlcore::tools {
namespace {

using Filter = std::unique_ptr<std::remove_pointer_t<scmp_filter_ctx>, decltype(&seccomp_release)>;

void check(int rc, const std::string& what) {
  if (rc < 0) throw IoError("python tool: seccomp filter: " + what + ": " + std::strerror(-rc));
}

// Creating a namespace of any kind, with clone() as with unshare().
constexpr unsigned long kNamespaceFlags[] = {CLONE_NEWNS,  CLONE_NEWUSER, CLONE_NEWPID,   CLONE_NEWNET,
                                             CLONE_NEWUTS, CLONE_NEWIPC,  CLONE_NEWCGROUP};

}  // namespace

std::vector<SystemCall> denied_system_calls() {
  static const char* const kNames[] = {
      // mounts and the filesystem tree
      "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
      "open_tree", "mount_setattr",
      // namespaces
      "setns", "unshare",
      // other processes' memory
      "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
      // the kernel itself
      "init_module", "finit_module", "delete_module", "bpf", "perf_event_open", "kexec_load", "kexec_file_load",
      "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "vhangup", "iopl", "ioperm",
      "lookup_dcookie", "uselib", "personality",
      // keys, handles and interfaces with a history of privilege escalations
      "keyctl", "add_key", "request_key", "open_by_handle_at", "name_to_handle_at", "userfaultfd", "io_uring_setup",
      "io_uring_enter", "io_uring_register", "fanotify_init",
      // the machine's identity and clocks
      "sethostname", "setdomainname", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex"};
  std::vector<SystemCall> calls;
  for (const char* name : kNames) {
    const int number = seccomp_syscall_resolve_name(name);
    if (number >= 0) calls.push_back({name, number});  // negative: not a call of this architecture
  }
  return calls;
}

std::string seccomp_filter_program() {
  Filter filter(seccomp_init(SCMP_ACT_ALLOW), &seccomp_release);
  if (!filter) throw IoError("python tool: seccomp filter: seccomp_init failed");
  const uint32_t refuse = SCMP_ACT_ERRNO(EPERM);
  for (const SystemCall& call : denied_system_calls()) {
    check(seccomp_rule_add(filter.get(), refuse, call.number, 0), call.name);
  }
  for (const unsigned long flag : kNamespaceFlags) {
    check(seccomp_rule_add(filter.get(), refuse, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)), "clone");
  }
  check(seccomp_rule_add(filter.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0), "clone3");
  for (const unsigned long request : {static_cast<unsigned long>(TIOCSTI), static_cast<unsigned long>(TIOCLINUX)}) {
    check(seccomp_rule_add(filter.get(), refuse, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, request)),
          "ioctl");
  }

  // libseccomp writes the program to a file descriptor: a memory file, read back.
  const int fd = ::memfd_create("rlcore-seccomp", MFD_CLOEXEC);
  if (fd < 0) throw IoError(std::string("python tool: seccomp filter: memfd_create: ") + std::strerror(errno));
  const int exported = seccomp_export_bpf(filter.get(), fd);
  std::string program;
  if (exported == 0) {
    const off_t size = ::lseek(fd, 0, SEEK_END);
    program.resize(static_cast<size_t>(std::max<off_t>(size, 0)));
    if (::pread(fd, program.data(), program.size(), 0) != static_cast<ssize_t>(program.size())) program.clear();
  }
  ::close(fd);
  check(exported, "export");
  if (program.empty()) throw IoError("python tool: seccomp filter: the exported program could not be read back");
  return program;
}

}  // namespace rlcore::tools
