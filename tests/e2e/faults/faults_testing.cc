// Helpers of the fault tests (see faults_testing.h).
#include "faults_testing.h"
#include "../../common/test_paths.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace fs = std::filesystem;

namespace faults {

RlcoreProcess::RlcoreProcess(const std::vector<std::string>& args, const std::vector<std::string>& extra_env,
                             bool own_group) {
  std::vector<std::string> argv = {rlcore_test::rlcore_executable()};
  argv.insert(argv.end(), args.begin(), args.end());
  for (const std::string& dir : {rlcore_test::plugin_build_dir(), rlcore_test::e2e_plugin_dir()}) {
    argv.push_back("--plugins");
    argv.push_back(dir);
  }
  std::vector<std::string> env;
  for (char** entry = environ; *entry; ++entry) env.emplace_back(*entry);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> argp, envp;
  for (auto& a : argv) argp.push_back(a.data());
  argp.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  if (own_group) {
    posix_spawnattr_setpgroup(&attributes, 0);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  }
  const int error = posix_spawn(&pid_, argv[0].c_str(), &actions, &attributes, argp.data(), envp.data());
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  fd_ = pipe_fds[0];
  if (error != 0) throw std::runtime_error("cannot start " + argv[0]);
}

RlcoreProcess::~RlcoreProcess() {
  if (!status_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  ::close(fd_);
}

void RlcoreProcess::pump(std::chrono::milliseconds wait) {
  if (!output_closed_) {
    pollfd item{fd_, POLLIN, 0};
    if (::poll(&item, 1, static_cast<int>(wait.count())) > 0) {
      char buffer[4096];
      const ssize_t got = ::read(fd_, buffer, sizeof buffer);
      if (got > 0) {
        output_.append(buffer, static_cast<std::size_t>(got));
        chunk_ends_.emplace_back(output_.size(), Clock::now());
      } else {
        output_closed_ = true;
      }
    }
  } else {
    std::this_thread::sleep_for(wait);
  }
  int status = 0;
  if (!status_ && ::waitpid(pid_, &status, WNOHANG) == pid_) {
    exited_at_ = Clock::now();
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
}

bool RlcoreProcess::wait_for_output(const std::string& text, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (output_.find(text) == std::string::npos) {
    if (output_closed_ || Clock::now() >= deadline) return false;
    pump(std::chrono::milliseconds(10));
  }
  return true;
}

bool RlcoreProcess::finish(std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!output_closed_ || !status_) {
    if (Clock::now() >= deadline) return false;
    pump(std::chrono::milliseconds(5));
  }
  return true;
}

std::string RlcoreProcess::error_line() const {
  const auto at = output_.find("rlcore: error: ");
  if (at == std::string::npos) return "";
  return output_.substr(at, output_.find('\n', at) - at);
}

std::optional<Clock::time_point> RlcoreProcess::seen_at(const std::string& text) const {
  const auto at = output_.find(text);
  if (at == std::string::npos) return std::nullopt;
  for (const auto& [end, time] : chunk_ends_) {
    if (end >= at + text.size()) return time;
  }
  return std::nullopt;
}

std::vector<pid_t> running_children_of(pid_t parent) {
  std::vector<pid_t> children;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line) || line.rfind(')') == std::string::npos) continue;
    // pid (comm) state ppid ...; comm may hold spaces and parentheses.
    std::istringstream fields(line.substr(line.rfind(')') + 2));
    char state = 0;
    pid_t ppid = 0;
    fields >> state >> ppid;
    if (ppid == parent && state != 'Z') children.push_back(std::stoi(name));
  }
  return children;
}

std::vector<pid_t> live_children() {
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  return running_children_of(::getpid());
}

std::vector<pid_t> children_left_after(std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  std::vector<pid_t> left = live_children();
  while (!left.empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    left = live_children();
  }
  return left;
}

}  // namespace faults
