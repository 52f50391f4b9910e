// The sandbox (see sandbox.h). The child does only system calls between fork
// and exec (the parent may have other threads): the mount points and argv are
// prepared before the fork.
#include "sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "rlcore/error.h"

namespace rlcore::tools {
namespace {

// Where the child reports what failed before exec (one errno and a step number).
struct SetupFailure {
  int step = 0;
  int error = 0;
};

const char* setup_step_name(int step) {
  switch (step) {
    case 1:
      return "unshare(CLONE_NEWNET | CLONE_NEWNS)";
    case 2:
      return "making the mounts private";
    case 3:
      return "bind-mounting the scratch directory";
    case 4:
      return "remounting a filesystem read-only";
    case 5:
      return "entering the scratch directory";
    case 6:
      return "setting the resource limits";
    case 7:
      return "exec";
    default:
      return "setting up";
  }
}

// Mount points of this process (the child's are a copy), "\040"-style escapes undone.
std::vector<std::string> mount_points() {
  std::vector<std::string> points;
  std::ifstream mountinfo("/proc/self/mountinfo");
  for (std::string line; std::getline(mountinfo, line);) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point;
    fields >> id >> parent >> device >> root >> point;
    std::string unescaped;
    for (size_t i = 0; i < point.size(); ++i) {
      if (point[i] == '\\' && i + 3 < point.size()) {
        unescaped += static_cast<char>(std::stoi(point.substr(i + 1, 3), nullptr, 8));
        i += 3;
      } else {
        unescaped += point[i];
      }
    }
    points.push_back(unescaped);
  }
  return points;
}

// Mounts whose read-only remount may fail without a hole: the kernel's views, not files a program keeps.
bool may_stay(const std::string& point) {
  for (const char* prefix : {"/proc", "/sys", "/dev"}) {
    const size_t n = std::strlen(prefix);
    if (point.compare(0, n, prefix) == 0 && (point.size() == n || point[n] == '/')) return true;
  }
  return false;
}

unsigned long kept_flags(const char* point) {
  struct statvfs info {};
  if (::statvfs(point, &info) != 0) return 0;
  unsigned long flags = 0;
  if (info.f_flag & ST_NOSUID) flags |= MS_NOSUID;
  if (info.f_flag & ST_NODEV) flags |= MS_NODEV;
  if (info.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (info.f_flag & ST_NOATIME) flags |= MS_NOATIME;
  if (info.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (info.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  return flags;
}

void set_limit(int resource, rlim_t value) {
  const struct rlimit limit { value, value };
  ::setrlimit(resource, &limit);
}

[[noreturn]] void child_fail(int report_fd, int step) {
  const SetupFailure failure{step, errno};
  [[maybe_unused]] const ssize_t written = ::write(report_fd, &failure, sizeof failure);
  ::_exit(127);
}

struct ChildPlan {
  std::vector<char*> argv;
  std::vector<char*> envp;
  const char* scratch = nullptr;
  std::vector<const char*> read_only;  // mount points to remount read-only
  std::vector<bool> must_hold;         // per read_only: a failure there is a failure
  std::vector<unsigned long> flags;    // per read_only: the flags to keep
  bool isolate = true;
  SandboxLimits limits;
};

[[noreturn]] void run_child(const ChildPlan& plan, int in_fd, int out_fd, int err_fd, int report_fd) {
  ::setpgid(0, 0);
  if (plan.isolate) {
    if (::unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) child_fail(report_fd, 1);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) child_fail(report_fd, 2);
    if (::mount(plan.scratch, plan.scratch, nullptr, MS_BIND, nullptr) != 0) child_fail(report_fd, 3);
    for (size_t i = 0; i < plan.read_only.size(); ++i) {
      if (::mount(nullptr, plan.read_only[i], nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | plan.flags[i], nullptr) !=
              0 &&
          plan.must_hold[i]) {
        child_fail(report_fd, 4);
      }
    }
  }
  if (::chdir(plan.scratch) != 0) child_fail(report_fd, 5);
  const auto seconds = static_cast<rlim_t>(plan.limits.cpu_seconds + 0.999);
  set_limit(RLIMIT_CPU, seconds);
  set_limit(RLIMIT_AS, static_cast<rlim_t>(plan.limits.memory_mb) << 20);
  set_limit(RLIMIT_FSIZE, static_cast<rlim_t>(plan.limits.file_size_mb) << 20);
  set_limit(RLIMIT_NPROC, static_cast<rlim_t>(plan.limits.max_processes));
  set_limit(RLIMIT_CORE, 0);
  ::dup2(in_fd, 0);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  for (int fd = 3; fd < 1024; ++fd) {
    if (fd != report_fd) ::close(fd);
  }
  ::execve(plan.argv[0], plan.argv.data(), plan.envp.data());
  child_fail(report_fd, 7);
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

}  // namespace

bool sandbox_available(std::string* why) {
  Pipe report;
  const pid_t pid = ::fork();
  if (pid < 0) {
    if (why) *why = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    if (::unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) child_fail(report.write_end(), 1);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) child_fail(report.write_end(), 2);
    ::_exit(0);
  }
  report.close_write();
  SetupFailure failure;
  const bool failed = ::read(report.read_end(), &failure, sizeof failure) == sizeof failure;
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (failed && why) *why = std::string(setup_step_name(failure.step)) + ": " + std::strerror(failure.error);
  return !failed && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

SandboxResult run_sandboxed(const std::vector<std::string>& argv, const std::string& scratch_dir,
                            const SandboxLimits& limits, bool isolate) {
  ChildPlan plan;
  std::vector<std::string> args = argv;
  for (auto& arg : args) plan.argv.push_back(arg.data());
  plan.argv.push_back(nullptr);
  std::vector<std::string> environment = {
      "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + scratch_dir, "TMPDIR=" + scratch_dir, "LANG=C.UTF-8",
      "PYTHONDONTWRITEBYTECODE=1",         "PYTHONUNBUFFERED=1"};
  for (auto& entry : environment) plan.envp.push_back(entry.data());
  plan.envp.push_back(nullptr);
  plan.scratch = scratch_dir.c_str();
  plan.isolate = isolate;
  plan.limits = limits;
  const std::vector<std::string> points = isolate ? mount_points() : std::vector<std::string>();
  for (const auto& point : points) {
    if (point == scratch_dir) continue;
    plan.read_only.push_back(point.c_str());
    plan.must_hold.push_back(!may_stay(point));
    plan.flags.push_back(kept_flags(point.c_str()));
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
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limits.wall_seconds);
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    struct pollfd fds[2] = {{out_open ? out.read_end() : -1, POLLIN, 0}, {err_open ? err.read_end() : -1, POLLIN, 0}};
    const int ready = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (out_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)))
      out_open = drain(out.read_end(), result.out, limits.output_bytes, result.output_truncated);
    if (err_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)))
      err_open = drain(err.read_end(), result.err, limits.output_bytes, result.output_truncated);
  }
  ::kill(-pid, SIGKILL);  // the group: whatever it started goes too
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  SetupFailure failure;
  if (::read(report.read_end(), &failure, sizeof failure) == sizeof failure) {
    throw IoError(std::string("sandbox: ") + setup_step_name(failure.step) +
                  " failed: " + std::strerror(failure.error));
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace rlcore::tools
