// Helpers of the fault tests: rlcore running in the background with its output
// read as it comes (and timed), and the processes a run left behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace faults {

using Clock = std::chrono::steady_clock;

class RlcoreProcess {
 public:
  // Starts build/bin/rlcore `args` (plus the e2e plugin directories) with
  // `extra_env` ("NAME=value") added, stdout and stderr into one pipe.
  // `own_group`: rlcore leads a process group of its own, which its local
  // workers join, so kill(-pid(), ...) signals every task as `srun` does.
  RlcoreProcess(const std::vector<std::string>& args, const std::vector<std::string>& extra_env,
                bool own_group = false);
  ~RlcoreProcess();  // SIGKILL if still running
  RlcoreProcess(const RlcoreProcess&) = delete;
  RlcoreProcess& operator=(const RlcoreProcess&) = delete;

  // Reads until `text` appears; false if the output closed or `limit` passed first.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds limit);
  // Reads until rlcore has exited and every holder of its output (its workers
  // too) has closed it; false if `limit` passed first.
  bool finish(std::chrono::milliseconds limit);

  pid_t pid() const { return pid_; }
  const std::string& output() const { return output_; }
  bool output_closed() const { return output_closed_; }
  std::optional<int> exit_status() const { return status_; }  // 128 + signal when killed
  std::optional<Clock::time_point> exited_at() const { return exited_at_; }
  // When the output first held `text`.
  std::optional<Clock::time_point> seen_at(const std::string& text) const;
  // The line of the run's error ("rlcore: error: ..."); empty if there is none.
  std::string error_line() const;

 private:
  void pump(std::chrono::milliseconds wait);

  pid_t pid_ = -1;
  int fd_ = -1;
  std::string output_;
  std::vector<std::pair<std::size_t, Clock::time_point>> chunk_ends_;
  bool output_closed_ = false;
  std::optional<int> status_;
  std::optional<Clock::time_point> exited_at_;
};

// The processes whose parent is `parent`, zombies left out.
std::vector<pid_t> running_children_of(pid_t parent);

// This process's children that are still running, once ended ones are reaped.
// With PR_SET_CHILD_SUBREAPER set, a run's orphaned workers count as ours.
std::vector<pid_t> live_children();

// live_children(), given up to `limit` to become empty.
std::vector<pid_t> children_left_after(std::chrono::milliseconds limit);

}  // namespace faults
