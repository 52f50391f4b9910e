// The project's Python, which carries the test-time references (transformers,
// tokenizers, pyarrow, tensorboard, openai; scripts/python-requirements.txt):
// $RLCORE_PYTHON, else <source>/.venv/bin/python (scripts/setup_python.sh makes
// it; scripts/test.sh runs that first). A missing interpreter or package fails
// the test that needs it, naming the fix: a reference never skips itself.
// Include after catch.hpp.
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>
#include "test_paths.h"

namespace rlcore_test {

inline std::string reference_python() {
  const char* configured = std::getenv("RLCORE_PYTHON");
  const std::string python =
      configured != nullptr && *configured != '\0' ? configured : source_dir() + "/.venv/bin/python";
  if (::access(python.c_str(), X_OK) != 0) {
    FAIL("no reference Python at " << python << ": run `bash scripts/setup_python.sh` (scripts/test.sh does) "
                                   << "or point RLCORE_PYTHON at an interpreter with scripts/python-requirements.txt");
  }
  return python;
}

// A script under tests/ (path relative to tests/), for run_reference().
inline std::string reference_script(const std::string& relative) { return source_dir() + "/tests/" + relative; }

// One interpreter per test binary runs every reference script it asks for
// (tests/common/reference_driver.py), so torch and transformers are imported once,
// not once per call. Each script still runs as `python SCRIPT ARGS...` would: as
// __main__, with this process's current environment and working directory.
class ReferenceDriver {
 public:
  struct Result {
    int status = -1;  // the script's exit status; -1: the driver itself died (the message says how)
    std::string output;
  };

  static ReferenceDriver& instance() {
    static ReferenceDriver driver;
    return driver;
  }

  ReferenceDriver(const ReferenceDriver&) = delete;
  ReferenceDriver& operator=(const ReferenceDriver&) = delete;

  ~ReferenceDriver() {
    if (owner_ == ::getpid()) stop();  // not in a forked child that exits through atexit
  }

  Result run(const std::string& script, const std::vector<std::string>& args) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pid_ < 0) start();
    std::string request =
        std::to_string(2 + args.size() + environment_size()) + " " + std::to_string(args.size()) + "\n";
    auto field = [&request](const std::string& text) { request += std::to_string(text.size()) + "\n" + text; };
    field(std::filesystem::current_path().string());
    field(script);
    for (const std::string& arg : args) field(arg);
    for (char** entry = environ; *entry != nullptr; ++entry) field(*entry);
    Result result;
    std::string header;
    if (!send_all(request) || !read_line(header)) return died();
    const size_t space = header.find(' ');
    result.status = std::stoi(header.substr(0, space));
    if (!read_exactly(std::stoul(header.substr(space + 1)), result.output)) return died();
    return result;
  }

 private:
  ReferenceDriver() = default;

  static size_t environment_size() {
    size_t count = 0;
    for (char** entry = environ; *entry != nullptr; ++entry) ++count;
    return count;
  }

  void start() {
    const std::string python = reference_python();
    const std::string driver = source_dir() + "/tests/common/reference_driver.py";
    int sockets[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // The driver outlives this call: it must hold none of the test's descriptors (a listening
      // socket, a pipe's write end), or a test waiting for their close would wait for ever.
      const int devnull = ::open("/dev/null", O_RDONLY);
      ::dup2(devnull, 0);
      if (sockets[1] == 3) {
        ::fcntl(3, F_SETFD, 0);
      } else {
        ::dup2(sockets[1], 3);  // dup2 clears close-on-exec on the copy
      }
      if (::syscall(SYS_close_range, 4U, ~0U, 0U) != 0) {
        for (int fd = 4; fd < 65536; ++fd) ::close(fd);
      }
      ::execl(python.c_str(), python.c_str(), driver.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(sockets[1]);
    socket_ = sockets[0];
    pid_ = pid;
    owner_ = ::getpid();
  }

  void stop() {
    if (pid_ < 0) return;
    ::close(socket_);  // the driver reads end-of-file and exits
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    socket_ = -1;
  }

  Result died() {
    ::close(socket_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    socket_ = -1;
    Result result;
    result.output = "the reference driver (tests/common/reference_driver.py) died: " +
                    (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                         : "exit status " + std::to_string(WEXITSTATUS(status)));
    return result;
  }

  bool send_all(const std::string& bytes) const {
    for (size_t sent = 0; sent < bytes.size();) {
      const ssize_t n = ::send(socket_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  bool read_line(std::string& line) const {
    char c = 0;
    while (true) {
      const ssize_t n = ::read(socket_, &c, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      if (c == '\n') return true;
      line += c;
    }
  }

  bool read_exactly(size_t size, std::string& bytes) const {
    bytes.resize(size);
    for (size_t got = 0; got < size;) {
      const ssize_t n = ::read(socket_, bytes.data() + got, size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      got += static_cast<size_t>(n);
    }
    return true;
  }

  std::mutex mutex_;
  pid_t pid_ = -1;
  pid_t owner_ = -1;
  int socket_ = -1;
};

// Runs `python script args...` (in the binary's reference driver, above) and returns what it
// printed; fails the test with the command and everything it printed when it exits non-zero.
inline std::string run_reference(const std::string& script, const std::vector<std::string>& args = {}) {
  auto quote = [](const std::string& word) {
    std::string quoted = "'";
    for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
  };
  std::string command = quote(reference_python()) + " " + quote(script);
  for (const std::string& arg : args) command += " " + quote(arg);
  const ReferenceDriver::Result result = ReferenceDriver::instance().run(script, args);
  INFO("reference: " << command << "\n" << result.output);
  REQUIRE(result.status == 0);
  return result.output;
}

}  // namespace rlcore_test
