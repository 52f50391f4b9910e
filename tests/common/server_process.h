// `rlcore serve` (or another server program) as a child process for tests: started on a free port (the
// banner line names it), stopped with SIGTERM (SIGKILL if it lingers) when the
// object goes away. Throws when the server does not come up within the limit,
// with what it printed.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace rlcore_test {

class ServerProcess {
 public:
  // `args` follow `rlcore serve`; stdout and stderr are read until the banner.
  ServerProcess(const std::string& rlcore, const std::vector<std::string>& args, double timeout_s = 120)
      : ServerProcess(serve_command(rlcore, args), timeout_s) {}

  // Any program (argv[0]: its path) that prints the same banner,
  // "listening on http://HOST:PORT", e.g. a Python stand-in server.
  explicit ServerProcess(std::vector<std::string> argv_strings, double timeout_s = 120) {
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) throw std::runtime_error("ServerProcess: pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("ServerProcess: fork failed");
    if (pid_ == 0) {
      ::dup2(pipe_fds[1], STDOUT_FILENO);
      ::dup2(pipe_fds[1], STDERR_FILENO);
      ::close(pipe_fds[0]);
      ::close(pipe_fds[1]);
      std::vector<char*> argv;
      for (std::string& s : argv_strings) argv.push_back(s.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(pipe_fds[1]);
    out_ = pipe_fds[0];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    const std::string marker = "listening on http://";
    while (url_.empty()) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd fd{out_, POLLIN, 0};
      char buffer[4096];
      ssize_t got = 0;
      if (left.count() <= 0 || ::poll(&fd, 1, static_cast<int>(left.count())) <= 0 ||
          (got = ::read(out_, buffer, sizeof(buffer))) <= 0) {
        stop();
        throw std::runtime_error(argv_strings[0] + " did not start:\n" + printed_);
      }
      printed_.append(buffer, static_cast<std::size_t>(got));
      const auto at = printed_.find(marker);
      const auto end = at == std::string::npos ? at : printed_.find_first_of(" \n", at + marker.size());
      if (end != std::string::npos) url_ = printed_.substr(at + marker.size() - 7, end - (at + marker.size() - 7));
    }
    // Keep draining its output so a chatty server never blocks on a full pipe.
    drain_ = std::thread([fd = out_] {
      char buffer[4096];
      while (::read(fd, buffer, sizeof(buffer)) > 0) {
      }
    });
  }
  ~ServerProcess() { stop(); }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  const std::string& url() const { return url_; }  // http://127.0.0.1:PORT
  pid_t pid() const { return pid_; }

  // SIGTERM, then SIGKILL after `grace_s`; idempotent.
  void stop(double grace_s = 10) {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
      int status = 0;
      while (::waitpid(pid_, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
          ::kill(pid_, SIGKILL);
          ::waitpid(pid_, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      pid_ = -1;
    }
    if (drain_.joinable()) drain_.join();
    if (out_ >= 0) {
      ::close(out_);
      out_ = -1;
    }
  }

 private:
  static std::vector<std::string> serve_command(const std::string& rlcore, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {rlcore, "serve"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  std::string url_;
  std::string printed_;
  std::thread drain_;
};

}  // namespace rlcore_test
