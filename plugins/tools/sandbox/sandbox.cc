// The sandbox (see sandbox.h). The child does only system calls between fork
// and exec (the parent may have other threads): paths, argv and the seccomp
// program are prepared before the fork.
#include "sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <filesystem>

#include "bubblewrap.h"
#include "rlcore/error.h"
#include "seccomp_filter.h"

namespace rlcore::tools {

struct Sandbox::Isolation {
  std::string bubblewrap;
  std::string seccomp_program;
  CgroupParent cgroups;
  std::vector<std::string> read_only;
  std::optional<std::pair<uid_t, gid_t>> drop;
};

namespace {

constexpr int kSeccompFd = 3;  // where bwrap finds the filter (--seccomp 3)

// What the child reports when a step before exec fails: the step, errno and which file.
struct SetupFailure {
  int step = 0;
  int error = 0;
  int index = 0;
};

enum Step { kJoinCgroup = 1, kChangeDirectory, kDropGroups, kDropGid, kDropUid, kNoNewPrivileges, kExec };

std::string step_name(const SetupFailure& failure, const std::vector<std::string>& procs_files) {
  switch (failure.step) {
    case kJoinCgroup:
      return "joining the cgroup " +
             (failure.index < static_cast<int>(procs_files.size()) ? procs_files[failure.index] : std::string("?"));
    case kChangeDirectory:
      return "entering the scratch directory";
    case kDropGroups:
      return "setgroups";
    case kDropGid:
      return "setresgid";
    case kDropUid:
      return "setresuid";
    case kNoNewPrivileges:
      return "prctl(PR_SET_NO_NEW_PRIVS)";
    case kExec:
      return "exec";
    default:
      return "setting up";
  }
}

[[noreturn]] void child_fail(int report_fd, int step, int index = 0) {
  const SetupFailure failure{step, errno, index};
  [[maybe_unused]] const ssize_t written = ::write(report_fd, &failure, sizeof failure);
  ::_exit(127);
}

void set_limit(int resource, rlim_t value) {
  const struct rlimit limit { value, value };
  ::setrlimit(resource, &limit);
}

void close_from(unsigned first, unsigned last) {
  if (first > last) return;
  if (::syscall(SYS_close_range, first, last, 0) == 0) return;
  for (unsigned fd = first; fd <= std::min(last, 4096u); ++fd) ::close(static_cast<int>(fd));
}

struct ChildPlan {
  std::vector<char*> argv;
  std::vector<char*> envp;
  const char* scratch = nullptr;
  std::vector<const char*> procs_files;  // cgroups to join
  int seccomp_fd = -1;
  std::optional<std::pair<uid_t, gid_t>> drop;
  bool isolated = false;
  SandboxLimits limits;
};

[[noreturn]] void run_child(const ChildPlan& plan, int in_fd, int out_fd, int err_fd, int report_fd) {
  ::setpgid(0, 0);
  for (size_t i = 0; i < plan.procs_files.size(); ++i) {
    const int fd = ::open(plan.procs_files[i], O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "0", 1) != 1) child_fail(report_fd, kJoinCgroup, static_cast<int>(i));
    ::close(fd);
  }
  if (::chdir(plan.scratch) != 0) child_fail(report_fd, kChangeDirectory);
  set_limit(RLIMIT_CPU, static_cast<rlim_t>(plan.limits.cpu_seconds + 0.999));
  set_limit(RLIMIT_AS, static_cast<rlim_t>(plan.limits.memory_mb) << 20);
  set_limit(RLIMIT_FSIZE, static_cast<rlim_t>(plan.limits.file_size_mb) << 20);
  set_limit(RLIMIT_CORE, 0);
  // Isolated, the cgroup bounds the processes: a per-user count would let one call starve the others.
  if (!plan.isolated) set_limit(RLIMIT_NPROC, static_cast<rlim_t>(plan.limits.max_processes));

  // Above the numbers dup2 fills below, whatever numbers the parent's descriptors had.
  report_fd = ::fcntl(report_fd, F_DUPFD_CLOEXEC, kSeccompFd + 8);
  const int seccomp_fd = plan.seccomp_fd >= 0 ? ::fcntl(plan.seccomp_fd, F_DUPFD_CLOEXEC, kSeccompFd + 8) : -1;
  ::dup2(in_fd, 0);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  if (seccomp_fd >= 0) ::dup2(seccomp_fd, kSeccompFd);  // without close-on-exec: bwrap reads it
  close_from(plan.seccomp_fd >= 0 ? kSeccompFd + 1 : kSeccompFd, static_cast<unsigned>(report_fd) - 1);
  close_from(static_cast<unsigned>(report_fd) + 1, UINT_MAX);
  set_limit(RLIMIT_NOFILE, static_cast<rlim_t>(plan.limits.max_open_files));

  if (plan.drop) {
    // The system calls themselves: the C library's wrappers would signal the parent's other threads,
    // which the child of a fork does not have.
    const auto [uid, gid] = *plan.drop;
    if (::syscall(SYS_setgroups, 0, nullptr) != 0) child_fail(report_fd, kDropGroups);
    if (::syscall(SYS_setresgid, gid, gid, gid) != 0) child_fail(report_fd, kDropGid);
    if (::syscall(SYS_setresuid, uid, uid, uid) != 0) child_fail(report_fd, kDropUid);
  }
  if (plan.isolated) {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) child_fail(report_fd, kNoNewPrivileges);
    // After the uid change, which clears it: bwrap (and with it the call) goes if the caller's thread does.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  }
  ::execve(plan.argv[0], plan.argv.data(), plan.envp.data());
  child_fail(report_fd, kExec);
}

class Pipe {
 public:
  Pipe() {
    if (::pipe2(fds_, O_CLOEXEC) != 0) throw IoError(std::string("sandbox: pipe: ") + std::strerror(errno));
  }
  ~Pipe() {
    close_read();
    close_write();
  }
  int read_end() const { return fds_[0]; }
  int write_end() const { return fds_[1]; }
  void close_read() { close_fd(fds_[0]); }
  void close_write() { close_fd(fds_[1]); }

 private:
  static void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  int fds_[2] = {-1, -1};
};

// The seccomp program in a memory file of its own (bwrap reads it from the start, once).
class SeccompFile {
 public:
  explicit SeccompFile(const std::string& program) {
    fd_ = ::memfd_create("rlcore-seccomp", MFD_CLOEXEC);
    if (fd_ < 0 || ::write(fd_, program.data(), program.size()) != static_cast<ssize_t>(program.size()) ||
        ::lseek(fd_, 0, SEEK_SET) != 0) {
      throw IoError(std::string("sandbox: the seccomp program's memory file: ") + std::strerror(errno));
    }
  }
  ~SeccompFile() { ::close(fd_); }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// Reads what is there into `into` up to `cap` bytes (the rest is dropped); false at EOF.
bool drain(int fd, std::string& into, int64_t cap, bool& truncated) {
  char buffer[65536];
  const ssize_t got = ::read(fd, buffer, sizeof buffer);
  if (got <= 0) return got < 0 && (errno == EINTR || errno == EAGAIN);
  const auto room = static_cast<size_t>(std::max<int64_t>(cap - static_cast<int64_t>(into.size()), 0));
  into.append(buffer, std::min(room, static_cast<size_t>(got)));
  if (static_cast<size_t>(got) > room) truncated = true;
  return true;
}

// Reads stdout and stderr until both end or the deadline passes; true when the deadline did.
bool collect_output(int out_fd, int err_fd, double wall_seconds, SandboxResult& result, int64_t cap) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wall_seconds);
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return true;
    struct pollfd fds[2] = {{out_open ? out_fd : -1, POLLIN, 0}, {err_open ? err_fd : -1, POLLIN, 0}};
    const int ready = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) return false;
    if (out_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)))
      out_open = drain(out_fd, result.out, cap, result.output_truncated);
    if (err_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)))
      err_open = drain(err_fd, result.err, cap, result.output_truncated);
  }
  return false;
}

std::optional<std::pair<uid_t, gid_t>> unprivileged_identity() {
  if (::geteuid() != 0) return std::nullopt;
  const struct passwd* nobody = ::getpwnam("nobody");
  if (nobody == nullptr || nobody->pw_uid == 0) {
    throw IoError("python tool: running as root, it runs the code as the user 'nobody', which this system lacks");
  }
  return std::make_pair(nobody->pw_uid, nobody->pw_gid);
}

}  // namespace

Sandbox Sandbox::isolated(const IsolationSettings& settings) {
  auto isolation = std::make_shared<Isolation>();
  isolation->bubblewrap = find_bubblewrap();
  if (isolation->bubblewrap.empty()) {
    throw IoError("python tool: bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)");
  }
  if (::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) {
    throw IoError(std::string("python tool: this kernel has no seccomp: ") + std::strerror(errno));
  }
  isolation->seccomp_program = seccomp_filter_program();
  isolation->cgroups = CgroupParent::find(settings.cgroup_parent);
  isolation->read_only = settings.read_only;
  isolation->drop = unprivileged_identity();
  Sandbox sandbox;
  sandbox.isolation_ = std::move(isolation);
  return sandbox;
}

Sandbox Sandbox::limits_only() { return Sandbox(); }

std::optional<std::pair<uid_t, gid_t>> Sandbox::drops_to() const {
  return isolation_ ? isolation_->drop : std::nullopt;
}

SandboxResult Sandbox::run(const std::vector<std::string>& argv, const std::string& scratch_dir,
                           const SandboxLimits& limits) const {
  std::vector<std::string> args = argv;
  std::unique_ptr<CallCgroup> cgroup;
  std::unique_ptr<SeccompFile> seccomp;
  if (isolation_) {
    cgroup = std::make_unique<CallCgroup>(isolation_->cgroups,
                                          CgroupLimits{limits.max_processes, limits.memory_mb << 20, limits.cpu_cores});
    seccomp = std::make_unique<SeccompFile>(isolation_->seccomp_program);
    BubblewrapPlan bubblewrap;
    bubblewrap.bubblewrap = isolation_->bubblewrap;
    bubblewrap.read_only = isolation_->read_only;
    bubblewrap.scratch = scratch_dir;
    bubblewrap.seccomp_fd = kSeccompFd;
    // Both tmpfs count in the call's memory; half of it for files leaves the interpreter room.
    bubblewrap.scratch_bytes = (limits.memory_mb << 20) / 2;
    bubblewrap.shm_bytes = std::min<int64_t>((limits.memory_mb << 20) / 4, 64 << 20);
    for (const auto& entry : std::filesystem::directory_iterator(scratch_dir)) {
      if (entry.is_regular_file()) bubblewrap.scratch_files.push_back(entry.path().filename().string());
    }
    bubblewrap.command = argv;
    args = bubblewrap_argv(bubblewrap);
  }

  ChildPlan plan;
  for (auto& arg : args) plan.argv.push_back(arg.data());
  plan.argv.push_back(nullptr);
  std::vector<std::string> environment = {
      "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + scratch_dir, "TMPDIR=" + scratch_dir, "LANG=C.UTF-8",
      "PYTHONDONTWRITEBYTECODE=1",         "PYTHONUNBUFFERED=1"};
  for (auto& entry : environment) plan.envp.push_back(entry.data());
  plan.envp.push_back(nullptr);
  plan.scratch = scratch_dir.c_str();
  plan.limits = limits;
  plan.isolated = isolating();
  if (cgroup) {
    for (const auto& file : cgroup->procs_files()) plan.procs_files.push_back(file.c_str());
    plan.seccomp_fd = seccomp->fd();
    plan.drop = isolation_->drop;
  }

  Pipe in, out, err, report;
  const pid_t pid = ::fork();
  if (pid < 0) throw IoError(std::string("sandbox: fork: ") + std::strerror(errno));
  if (pid == 0) run_child(plan, in.read_end(), out.write_end(), err.write_end(), report.write_end());
  ::setpgid(pid, pid);  // as the child does: no race with the kill below
  in.close_read();
  in.close_write();  // no input: the program reads EOF
  out.close_write();
  err.close_write();
  report.close_write();

  SandboxResult result;
  result.timed_out = collect_output(out.read_end(), err.read_end(), limits.wall_seconds, result, limits.output_bytes);
  // Isolated, the cgroup holds everything the call started, whatever its process group or session.
  if (cgroup) cgroup->kill_all();
  ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  SetupFailure failure;
  if (::read(report.read_end(), &failure, sizeof failure) == sizeof failure) {
    throw IoError("sandbox: " + step_name(failure, cgroup ? cgroup->procs_files() : std::vector<std::string>()) +
                  " failed: " + std::strerror(failure.error));
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
    // bwrap's init reports a program killed by signal N as 128 + N, as a shell does.
    if (cgroup && result.exit_code > 128 && result.exit_code < 128 + NSIG) {
      result.signal = result.exit_code - 128;
      result.exit_code = -1;
    }
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  if (cgroup) {
    result.memory_exhausted = cgroup->memory_exhausted();
    result.processes_exhausted = cgroup->pids_exhausted();
  }
  return result;
}

}  // namespace rlcore::tools
