// A worker dies or hangs in each phase of a GRPO step (RLCORE_FAULT, see
// rlcore/fault_point.h): rlcore names that worker first, exits with status 1
// soon after, and leaves no process of the run behind.
#include "../e2e_testing.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

extern char** environ;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double kHeartbeatTimeoutS = 3.0;

struct Phase {
  const char* point;   // the fault point
  const char* method;  // the controller's call it breaks
};

// Every phase of a step that runs on the workers, in the order a step reaches them.
const Phase kPhases[] = {
    {"actor.generate", "actor.generate"},
    {"actor.swap_to_rollout", "actor.generate"},
    {"actor.swap_to_train", "actor.generate"},
    {"actor.compute_log_prob", "actor.compute_log_prob"},
    {"actor.update_actor", "actor.update_actor"},
    {"actor.sync_weights", "actor.sync_weights"},
    {"actor.validate", "actor.generate"},
    {"actor.save_checkpoint", "actor.save_checkpoint"},
    {"fsdp.save_checkpoint.rank_files_written", "actor.save_checkpoint"},
};

struct Action {
  const char* name;
  const char* reported;  // how the controller describes the death
  int trials;            // repeated where the report used to race a survivor's error
};

const Action kActions[] = {
    {"kill", "killed by signal 9", 2},
    {"segv", "killed by signal 11", 1},
    {"exit3", "exited with status 3", 1},
    {"hang", "no message or heartbeat", 1},
};

struct Outcome {
  int status = -1;
  std::string output;
  double exit_after_fault_s = -1;  // from the fault's stderr line to rlcore's exit
  bool output_closed = false;      // every process holding rlcore's stderr has ended
};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Runs rlcore with RLCORE_FAULT=`fault`, reading its output as it comes.
Outcome run_with_fault(const std::vector<std::string>& args, const std::string& fault) {
  std::vector<std::string> argv = {RLCORE_BINARY_DIR "/bin/rlcore"};
  argv.insert(argv.end(), args.begin(), args.end());
  for (const char* dir : {RLCORE_PLUGIN_BUILD_DIR, RLCORE_E2E_PLUGIN_DIR}) {
    argv.push_back("--plugins");
    argv.push_back(dir);
  }
  std::vector<std::string> env;
  for (char** entry = environ; *entry; ++entry) env.emplace_back(*entry);
  env.push_back("RLCORE_FAULT=" + fault);
  std::vector<char*> argp, envp;
  for (auto& a : argv) argp.push_back(a.data());
  argp.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int pipe_fds[2];
  REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  REQUIRE(error == 0);

  Outcome outcome;
  std::optional<Clock::time_point> fault_at, exit_at;
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while ((!outcome.output_closed || !exit_at) && Clock::now() < deadline) {
    pollfd item{pipe_fds[0], POLLIN, 0};
    if (!outcome.output_closed && ::poll(&item, 1, 10) > 0) {
      char buffer[4096];
      const ssize_t got = ::read(pipe_fds[0], buffer, sizeof buffer);
      if (got <= 0) outcome.output_closed = true;
      if (got > 0) outcome.output.append(buffer, static_cast<std::size_t>(got));
      if (!fault_at && outcome.output.find("rlcore fault injection:") != std::string::npos) fault_at = Clock::now();
    } else if (outcome.output_closed) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    int status = 0;
    if (!exit_at && ::waitpid(pid, &status, WNOHANG) == pid) {
      exit_at = Clock::now();
      outcome.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
  }
  ::close(pipe_fds[0]);
  if (!exit_at) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  if (fault_at && exit_at) outcome.exit_after_fault_s = seconds(*exit_at - *fault_at);
  return outcome;
}

// Our children that are still running (the run's orphans are re-parented to
// us: this process is a child subreaper); ended ones are reaped.
std::vector<pid_t> live_children() {
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  std::vector<pid_t> alive;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...; comm may hold spaces and parentheses.
    std::istringstream fields(line.substr(line.rfind(')') + 2));
    char state = 0;
    pid_t parent = 0;
    fields >> state >> parent;
    if (parent == ::getpid() && state != 'Z') alive.push_back(std::stoi(name));
  }
  return alive;
}

void check_fault(const std::string& config, const std::string& val_files, int workers, const Phase& phase,
                 const Action& action, std::vector<double>& exit_times) {
  const int victim = workers - 2;  // rank 0 of two, rank 2 of four: never the last rank
  const std::string fault = std::string(phase.point) + ":" + action.name + "@" + std::to_string(victim);
  INFO("RLCORE_FAULT=" << fault << " with " << workers << " workers");
  const Outcome run = run_with_fault(
      {"--config", config, "runtime.n_workers_per_node=" + std::to_string(workers), "trainer.total_training_steps=1",
       "trainer.save_freq=1", "trainer.test_freq=1", "data.val_files=" + val_files,
       "runtime.heartbeat_timeout_s=" + std::to_string(kHeartbeatTimeoutS), "runtime.heartbeat_interval_s=0.5"},
      fault);
  INFO(run.output);
  REQUIRE(run.output_closed);
  CHECK(run.status == 1);

  std::smatch fault_line;
  REQUIRE(std::regex_search(run.output, fault_line, std::regex(R"(fault injection: \S+ at \S+ on rank (\d+) \(pid (\d+)\))")));
  CHECK(fault_line[1] == std::to_string(victim));
  const std::string victim_pid = fault_line[2];
  // The first worker the error names is the victim, with its pid and how it died.
  const auto error_at = run.output.find("rlcore: error: ");
  REQUIRE(error_at != std::string::npos);
  const std::string error = run.output.substr(error_at, run.output.find('\n', error_at) - error_at);
  CHECK_THAT(error, Catch::StartsWith("rlcore: error: call '" + std::string(phase.method) + "'"));
  std::smatch first;
  REQUIRE(std::regex_search(error, first, std::regex(R"(worker rank (\d+) \(host [^,]+, pid (\d+)\) was lost: ([^;]*))")));
  CHECK(first[1] == std::to_string(victim));
  CHECK(first[2] == victim_pid);
  CHECK_THAT(first[3].str(), Catch::Contains(action.reported));

  const double limit = std::string(action.name) == "hang" ? kHeartbeatTimeoutS + 5.0 : 5.0;
  CHECK(run.exit_after_fault_s >= 0);
  CHECK(run.exit_after_fault_s < limit);
  exit_times.push_back(run.exit_after_fault_s);
  // The launcher reaps its workers before rlcore exits; give stragglers a moment.
  std::vector<pid_t> left = live_children();
  for (int i = 0; i < 50 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    left = live_children();
  }
  CHECK(left.empty());
  for (pid_t pid : left) ::kill(pid, SIGKILL);
}

void check_every_phase(int workers) {
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  const rlimit no_core{0, 0};  // a segfaulting worker leaves no core file
  REQUIRE(::setrlimit(RLIMIT_CORE, &no_core) == 0);
  const std::string ws = e2e::make_workspace("faults_" + std::to_string(workers), 32);
  const std::string config = e2e::write_config(ws, "run", e2e::kQuickGrpo);
  std::map<std::string, std::vector<double>> exit_times;  // action -> seconds
  for (const Phase& phase : kPhases) {
    for (const Action& action : kActions) {
      for (int trial = 0; trial < action.trials; ++trial) {
        check_fault(config, ws + "/prompts.jsonl", workers, phase, action, exit_times[action.name]);
      }
    }
  }
  std::cout << "rlcore's exit after the fault, " << workers << " workers, " << std::size(kPhases) << " phases:\n";
  for (const auto& [action, times] : exit_times) {
    double worst = 0, sum = 0;
    for (double t : times) {
      worst = std::max(worst, t);
      sum += t;
    }
    std::cout << "  " << std::setw(6) << action << ": mean " << std::fixed << std::setprecision(2)
              << sum / static_cast<double>(times.size()) << " s, max " << worst << " s over " << times.size()
              << " runs\n";
  }
  fs::remove_all(ws);
}

}  // namespace

TEST_CASE("a worker that dies or hangs in any phase is named first, with two workers", "[faults]") {
  check_every_phase(2);
}

TEST_CASE("a worker that dies or hangs in any phase is named first, with four workers", "[faults]") {
  check_every_phase(4);
}
