// A long-lived child process spoken to in JSON lines: one request line to its
// stdin, one reply line from its stdout, under a deadline. Owns the child:
// started at construction, killed and reaped on timeout, failure or destruction.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace rlcore::process {

class JsonLinesProcess {
 public:
  // Starts argv[0] (looked up in PATH) with argv, in its own process group.
  // Throws rlcore::IoError when it cannot be started.
  explicit JsonLinesProcess(const std::vector<std::string>& argv);
  ~JsonLinesProcess();

  JsonLinesProcess(const JsonLinesProcess&) = delete;
  JsonLinesProcess& operator=(const JsonLinesProcess&) = delete;

  // Writes `line` and a newline, then returns the next line of stdout (without
  // the newline). Throws rlcore::IoError naming the cause (timeout, exit status
  // or signal, closed pipe); the child is then killed and reaped.
  std::string request(const std::string& line, std::chrono::milliseconds timeout);

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // The last few KiB the child wrote to stderr (also passed through to ours).
  const std::string& stderr_tail() const { return stderr_tail_; }

 private:
  void write_some(std::string& pending);
  bool read_stdout();  // false at EOF
  void read_stderr();
  // Kills the process group (when still alive), reaps the child and returns how it ended.
  std::string terminate(bool kill_now);

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  std::string stdout_buffer_;
  std::string stderr_tail_;
};

}  // namespace rlcore::process
