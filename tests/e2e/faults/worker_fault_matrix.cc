// The fault matrix (see worker_fault_matrix.h).
#include "worker_fault_matrix.h"

#include "../e2e_testing.h"
#include "faults_testing.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <regex>

namespace faults {
namespace fs = std::filesystem;

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

// `kill` first: Cells::kKillAndOneMore takes it in every phase.
const Action kActions[] = {
    {"kill", "killed by signal 9", 2},
    {"segv", "killed by signal 11", 1},
    {"exit3", "exited with status 3", 1},
    {"hang", "no message or heartbeat", 1},
};

void check_fault(const std::string& config, const std::string& val_files, int workers, const Phase& phase,
                 const Action& action, std::vector<double>& exit_times) {
  const int victim = workers - 2;  // rank 0 of two, rank 2 of four: never the last rank
  const std::string fault = std::string(phase.point) + ":" + action.name + "@" + std::to_string(victim);
  INFO("RLCORE_FAULT=" << fault << " with " << workers << " workers");
  faults::RlcoreProcess run(
      {"--config", config, "runtime.n_workers_per_node=" + std::to_string(workers), "trainer.total_training_steps=1",
       "trainer.save_freq=1", "trainer.test_freq=1", "data.val_files=" + val_files,
       "runtime.heartbeat_timeout_s=" + std::to_string(kHeartbeatTimeoutS), "runtime.heartbeat_interval_s=0.5"},
      {"RLCORE_FAULT=" + fault});
  const bool finished = run.finish(std::chrono::seconds(120));
  INFO(run.output());
  REQUIRE(finished);  // rlcore exited and no process holds its output any more
  CHECK(run.exit_status() == 1);

  std::smatch fault_line;
  REQUIRE(std::regex_search(run.output(), fault_line,
                            std::regex(R"(fault injection: \S+ at \S+ on rank (\d+) \(pid (\d+)\))")));
  CHECK(fault_line[1] == std::to_string(victim));
  const std::string victim_pid = fault_line[2];
  // The first worker the error names is the victim, with its pid and how it died.
  const std::string error = run.error_line();
  REQUIRE_FALSE(error.empty());
  CHECK_THAT(error, Catch::StartsWith("rlcore: error: call '" + std::string(phase.method) + "'"));
  std::smatch first;
  REQUIRE(
      std::regex_search(error, first, std::regex(R"(worker rank (\d+) \(host [^,]+, pid (\d+)\) was lost: ([^;]*))")));
  CHECK(first[1] == std::to_string(victim));
  CHECK(first[2] == victim_pid);
  CHECK_THAT(first[3].str(), Catch::Contains(action.reported));

  const double limit = std::string(action.name) == "hang" ? kHeartbeatTimeoutS + 5.0 : 5.0;
  const auto fault_at = run.seen_at("rlcore fault injection:");
  REQUIRE(fault_at);
  const double exit_after_fault_s = std::chrono::duration<double>(*run.exited_at() - *fault_at).count();
  CHECK(exit_after_fault_s < limit);
  exit_times.push_back(exit_after_fault_s);
  // The launcher reaps its workers before rlcore exits; give stragglers a moment.
  const std::vector<pid_t> left = faults::children_left_after(std::chrono::seconds(5));
  CHECK(left.empty());
  for (pid_t pid : left) ::kill(pid, SIGKILL);
}

}  // namespace

void check_every_phase(int workers, Cells cells) {
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  const rlimit no_core{0, 0};  // a segfaulting worker leaves no core file
  REQUIRE(::setrlimit(RLIMIT_CORE, &no_core) == 0);
  const std::string ws = e2e::make_workspace("faults_" + std::to_string(workers), 32);
  const std::string config = e2e::write_config(ws, "run", e2e::kQuickGrpo);
  std::map<std::string, std::vector<double>> exit_times;  // action -> seconds
  for (std::size_t p = 0; p < std::size(kPhases); ++p) {
    for (std::size_t a = 0; a < std::size(kActions); ++a) {
      const Action& action = kActions[a];
      int trials = action.trials;
      if (cells == Cells::kKillAndOneMore) trials = a == 0 || a == 1 + p % (std::size(kActions) - 1) ? 1 : 0;
      for (int trial = 0; trial < trials; ++trial) {
        check_fault(config, ws + "/prompts.jsonl", workers, kPhases[p], action, exit_times[action.name]);
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

}  // namespace faults
