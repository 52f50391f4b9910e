// JsonLinesProcess (see json_lines_process.h): posix_spawn with three pipes,
// nonblocking I/O driven by poll() against a deadline.
#include "json_lines_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>

#include "rlcore/error.h"

extern char** environ;

namespace rlcore::process {
namespace {

constexpr size_t kStderrTailBytes = 4096;
constexpr auto kExitGrace = std::chrono::milliseconds(500);

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "ended with wait status " + std::to_string(status);
}

// write() to a pipe whose reader is gone raises SIGPIPE, which would kill
// rlcore: block it in this thread for the call and swallow the pending signal.
ssize_t write_without_sigpipe(int fd, const char* data, size_t size) {
  sigset_t pipe_set, old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  const ssize_t written = ::write(fd, data, size);
  const int saved_errno = errno;
  if (written < 0 && saved_errno == EPIPE) {
    const timespec zero{0, 0};
    while (::sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  errno = saved_errno;
  return written;
}

}  // namespace

JsonLinesProcess::JsonLinesProcess(const std::vector<std::string>& argv) {
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw IoError(errno_text("pipe"));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]);
    throw IoError(errno_text("pipe"));
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]), ::close(out[0]), ::close(out[1]);
    throw IoError(errno_text("pipe"));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so a kill also reaches what the user's code started;
  // default SIGPIPE handling in the child even if ours is changed.
  sigset_t default_signals;
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &default_signals);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const int rc = ::posix_spawnp(&pid_, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]), ::close(out[1]), ::close(err[1]);
  stdin_fd_ = in[1], stdout_fd_ = out[0], stderr_fd_ = err[0];
  if (rc != 0) {
    pid_ = -1;
    close_fd(stdin_fd_), close_fd(stdout_fd_), close_fd(stderr_fd_);
    throw IoError("cannot start '" + argv[0] + "': " + std::strerror(rc));
  }
  set_nonblocking(stdin_fd_), set_nonblocking(stdout_fd_), set_nonblocking(stderr_fd_);
}

JsonLinesProcess::~JsonLinesProcess() {
  if (running()) terminate(false);
}

std::string JsonLinesProcess::request(const std::string& line, std::chrono::milliseconds timeout) {
  if (!running()) throw IoError("the process is not running");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string pending = line + "\n";
  for (;;) {
    const size_t newline = stdout_buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string reply = stdout_buffer_.substr(0, newline);
      stdout_buffer_.erase(0, newline + 1);
      return reply;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      terminate(true);
      std::ostringstream seconds;
      seconds << timeout.count() / 1000.0;
      throw IoError("no reply within " + seconds.str() + " s (killed it)");
    }
    pollfd fds[3] = {{stdout_fd_, POLLIN, 0}, {stderr_fd_, POLLIN, 0}, {pending.empty() ? -1 : stdin_fd_, POLLOUT, 0}};
    const int ready = ::poll(fds, 3, static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) throw IoError(errno_text("poll"));
    if (ready <= 0) continue;
    if (fds[1].revents != 0) read_stderr();
    if (fds[2].revents != 0) write_some(pending);
    if (fds[0].revents != 0 && !read_stdout() && stdout_buffer_.find('\n') == std::string::npos) {
      read_stderr();
      throw IoError("closed its stdout: it " + terminate(false));
    }
  }
}

void JsonLinesProcess::write_some(std::string& pending) {
  const ssize_t written = write_without_sigpipe(stdin_fd_, pending.data(), pending.size());
  if (written >= 0) {
    pending.erase(0, static_cast<size_t>(written));
    return;
  }
  if (errno == EAGAIN || errno == EINTR) return;
  const std::string cause = errno == EPIPE ? "closed its stdin" : errno_text("write");
  read_stderr();
  throw IoError(cause + ": it " + terminate(false));
}

bool JsonLinesProcess::read_stdout() {
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(stdout_fd_, buffer, sizeof(buffer));
    if (n > 0) {
      stdout_buffer_.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return true;  // EAGAIN: all read for now
  }
}

void JsonLinesProcess::read_stderr() {
  if (stderr_fd_ < 0) return;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(stderr_fd_, buffer, sizeof(buffer));
    if (n > 0) {
      // Passed through so the user's prints and warnings show in rlcore's log.
      [[maybe_unused]] const ssize_t ignored = ::write(2, buffer, static_cast<size_t>(n));
      stderr_tail_.append(buffer, static_cast<size_t>(n));
      if (stderr_tail_.size() > kStderrTailBytes) stderr_tail_.erase(0, stderr_tail_.size() - kStderrTailBytes);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) close_fd(stderr_fd_);
    return;
  }
}

std::string JsonLinesProcess::terminate(bool kill_now) {
  close_fd(stdin_fd_);  // EOF on its stdin: the adapter's loop ends and it exits
  int status = 0;
  pid_t reaped = 0;
  if (!kill_now) {
    const auto give_up = std::chrono::steady_clock::now() + kExitGrace;
    while ((reaped = ::waitpid(pid_, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < give_up) {
      read_stderr();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (reaped == 0) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    while ((reaped = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
  } else {
    ::kill(-pid_, SIGKILL);  // anything it left behind in its group
  }
  read_stderr();
  pid_ = -1;
  close_fd(stdout_fd_), close_fd(stderr_fd_);
  stdout_buffer_.clear();
  return reaped > 0 ? describe_status(status) : "could not be reaped";
}

}  // namespace rlcore::process
