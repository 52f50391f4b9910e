// Faults at every phase of the three training loops (sync, one_step_off,
// fully_async; docs/launch.md#liveness-and-failure, docs/async.md#faults), on
// the tiny model: a worker killed in a phase is named first and rlcore exits
// with 1 soon after; a SIGTERM that reaches every process in a phase (srun
// style, from a worker there) ends in a complete checkpoint and status 75; a
// kill during the preemption checkpoint leaves the previous checkpoint, which
// resumes. No process outlives any run. (worker_faults_test.cc covers the
// sync loop's phases with every kind of death, hung_collective_test.cc a rank
// stuck short of a collective.)
#include <signal.h>
#include <sys/prctl.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "../e2e_testing.h"
#include "faults_testing.h"
#include "rlcore/core/runtime/preemption.h"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace loop_faults {

// Two actor workers (ranks 0-1) and, in the asynchronous modes, a standalone
// rollout pool of two (ranks 2-3).
const char* const kOneStepOff = R"(
async_training: {mode: one_step_off}
rollout: {nnodes: 1, n_gpus_per_node: 2}
)";
const char* const kFullyAsync = R"(
async_training: {mode: fully_async, staleness_threshold: 0.5, trigger_parameter_sync_step: 1, partial_rollout: true}
rollout: {nnodes: 1, n_gpus_per_node: 2}
)";

struct Cell {
  const char* mode;  // a section appended to the quick GRPO config, "" for sync
  const char* mode_name;
  const char* point;  // where the fault strikes, on `victim`, the `hit`-th time
  int victim;
  int hit;
};

// The phases of a step that run on workers and that the sync loop does not
// have: generation and streaming on the rollout pool, and both ends of the
// weight transfer. Each cell's point is reached in the second step (or the
// first sync after it), so a checkpoint of step 1 exists.
const Cell kCells[] = {
    {kOneStepOff, "one_step_off", "rollout.generate", 2, 2},
    {kOneStepOff, "one_step_off", "actor.send_weights", 0, 2},
    {kOneStepOff, "one_step_off", "rollout.receive_weights", 3, 2},
    {kOneStepOff, "one_step_off", "actor.update_actor", 1, 2},
    {kFullyAsync, "fully_async", "rollout.stream", 3, 4},
    {kFullyAsync, "fully_async", "actor.send_weights", 0, 2},
    {kFullyAsync, "fully_async", "rollout.receive_weights", 2, 2},
    {kFullyAsync, "fully_async", "actor.compute_log_prob", 1, 2},
};

std::vector<std::string> three_steps(const std::string& config, const std::string& dir) {
  return {"--config", config, "trainer.total_training_steps=3", "trainer.save_freq=1",
          "trainer.default_local_dir=" + dir};
}

}  // namespace loop_faults

using namespace loop_faults;

TEST_CASE("a worker killed in any phase of the asynchronous loops is named first, and rlcore exits at once",
          "[faults][async]") {
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  const std::string ws = e2e::make_workspace("loop_faults_kill", 16);
  int index = 0;
  for (const Cell& cell : kCells) {
    const std::string fault =
        std::string(cell.point) + ":kill@" + std::to_string(cell.victim) + "#" + std::to_string(cell.hit);
    INFO(cell.mode_name << ", RLCORE_FAULT=" << fault);
    const std::string name = "run_" + std::to_string(index++);
    const std::string config = e2e::write_config(ws, name, std::string(e2e::kQuickGrpo) + cell.mode);
    faults::RlcoreProcess run(three_steps(config, ws + "/" + name), {"RLCORE_FAULT=" + fault});
    REQUIRE(run.finish(120s));
    INFO(run.output());
    CHECK(run.exit_status() == 1);
    std::smatch fault_line;
    REQUIRE(std::regex_search(run.output(), fault_line,
                              std::regex(R"(fault injection: kill at \S+ on rank (\d+) \(pid (\d+)\))")));
    const std::string error = run.error_line();
    REQUIRE_FALSE(error.empty());
    // The first worker the error names is the victim, with its pid.
    std::smatch first;
    REQUIRE(std::regex_search(error, first, std::regex(R"(worker rank (\d+) \(host [^,]+, pid (\d+)\))")));
    CHECK(first[1] == std::to_string(cell.victim));
    CHECK(first[2] == fault_line[2].str());
    CHECK_THAT(error, Catch::Contains("killed by signal 9"));
    const auto fault_at = run.seen_at("rlcore fault injection:");
    REQUIRE(fault_at);
    CHECK(std::chrono::duration<double>(*run.exited_at() - *fault_at).count() < 5.0);
    CHECK(faults::children_left_after(5s).empty());
  }
  fs::remove_all(ws);
}

TEST_CASE("SIGTERM to every process in any phase of the three loops: a checkpoint and status 75",
          "[faults][async][preemption]") {
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  const std::string ws = e2e::make_workspace("loop_faults_term", 16);
  std::vector<Cell> cells(std::begin(kCells), std::end(kCells));
  cells.push_back({"", "sync", "actor.generate", 1, 2});
  cells.push_back({"", "sync", "actor.update_actor", 0, 2});
  int index = 0;
  for (const Cell& cell : cells) {
    const std::string fault =
        std::string(cell.point) + ":term_group@" + std::to_string(cell.victim) + "#" + std::to_string(cell.hit);
    INFO(cell.mode_name << ", RLCORE_FAULT=" << fault);
    const std::string name = "run_" + std::to_string(index++);
    const std::string config = e2e::write_config(ws, name, std::string(e2e::kQuickGrpo) + cell.mode);
    faults::RlcoreProcess run(three_steps(config, ws + "/" + name), {"RLCORE_FAULT=" + fault}, /*own_group=*/true);
    REQUIRE(run.finish(120s));
    INFO(run.output());
    CHECK(run.exit_status() == rlcore::runtime::kExitPreempted);
    const std::string said = "rlcore: preempted by SIGTERM after step ";
    const auto at = run.output().find(said);
    REQUIRE(at != std::string::npos);
    const int64_t step = std::stoll(run.output().substr(at + said.size()));
    CHECK(step >= 1);
    CHECK(fs::exists(ws + "/" + name + "/checkpoints/global_step_" + std::to_string(step) + "/trainer_state.json"));
    CHECK(faults::children_left_after(5s).empty());
    if (std::string(cell.point) == "rollout.stream") {
      // fully_async resumes from the checkpoint's data order and weights, and finishes the run.
      std::vector<std::string> resumed_args = three_steps(config, ws + "/" + name);
      resumed_args.push_back("trainer.resume_mode=auto");
      const e2e::RunResult resumed = e2e::run_rlcore(resumed_args);
      INFO(resumed.output);
      CHECK(resumed.status == 0);
      CHECK_THAT(resumed.output,
                 Catch::Contains("resumed from") && Catch::Contains("(step " + std::to_string(step) + ")"));
      const auto metrics = e2e::read_metrics(ws + "/" + name);
      CHECK(metrics.count(3) == 1);
      CHECK(fs::exists(ws + "/" + name + "/checkpoints/global_step_3/trainer_state.json"));
    }
  }
  fs::remove_all(ws);
}

TEST_CASE("a kill during the preemption checkpoint leaves the previous checkpoint, which resumes",
          "[faults][preemption]") {
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  const std::string ws = e2e::make_workspace("loop_faults_preempt_kill", 16);
  const std::string config = e2e::write_config(ws, "run", e2e::kQuickGrpo);
  {
    // SIGTERM in step 2 (after its batch is generated); the step-2 checkpoint
    // is the preemption's, and the controller dies in the middle of it.
    faults::RlcoreProcess run(three_steps(config, ws + "/run"),
                              {"RLCORE_FAULT=checkpoint.commit.engines_saved:kill@controller#2"});
    REQUIRE(run.wait_for_output("step 1 |", 120s));
    ::kill(run.pid(), SIGTERM);
    REQUIRE(run.finish(120s));
    INFO(run.output());
    CHECK(run.exit_status() == 128 + SIGKILL);
    CHECK_THAT(run.output(), Catch::Contains("SIGTERM: finishing the current step, then a checkpoint"));
  }
  CHECK(faults::children_left_after(5s).empty());
  CHECK(fs::exists(ws + "/run/checkpoints/global_step_1/trainer_state.json"));
  CHECK_FALSE(fs::exists(ws + "/run/checkpoints/global_step_2/trainer_state.json"));
  std::vector<std::string> resumed_args = three_steps(config, ws + "/run");
  resumed_args.push_back("trainer.resume_mode=auto");
  const e2e::RunResult resumed = e2e::run_rlcore(resumed_args);
  INFO(resumed.output);
  CHECK(resumed.status == 0);
  CHECK_THAT(resumed.output, Catch::Contains("resumed from") && Catch::Contains("global_step_1"));
  fs::remove_all(ws);
}

TEST_CASE("a hung or stuck rollout worker in the asynchronous loops: named, and rlcore exits soon after",
          "[faults][async][collective]") {
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  const std::string ws = e2e::make_workspace("loop_faults_hang", 16);
  SECTION("stopped (SIGSTOP) while generating: the heartbeat finds it") {
    const std::string config = e2e::write_config(ws, "hang", std::string(e2e::kQuickGrpo) + kOneStepOff);
    std::vector<std::string> args = three_steps(config, ws + "/hang");
    args.insert(args.end(), {"runtime.heartbeat_timeout_s=3", "runtime.heartbeat_interval_s=0.5"});
    faults::RlcoreProcess run(args, {"RLCORE_FAULT=rollout.generate:hang@2#2"});
    REQUIRE(run.finish(120s));
    INFO(run.output());
    CHECK(run.exit_status() == 1);
    CHECK_THAT(run.output(), Catch::Contains("rlcore: error: ") &&
                                 Catch::Contains("of pool 'rollout', its rank 0 was lost: no message or heartbeat"));
    const auto fault_at = run.seen_at("rlcore fault injection:");
    REQUIRE(fault_at);
    CHECK(std::chrono::duration<double>(*run.exited_at() - *fault_at).count() < 3.0 + 5.0);
  }
  SECTION("stuck short of the weight transfer: the bridge's collective times out, naming it") {
    const std::string config = e2e::write_config(ws, "stall", std::string(e2e::kQuickGrpo) + kFullyAsync);
    std::vector<std::string> args = three_steps(config, ws + "/stall");
    args.push_back("runtime.collective_timeout_s=4");
    faults::RlcoreProcess run(args, {"RLCORE_FAULT=rollout.receive_weights:stall@3#2"});
    REQUIRE(run.finish(120s));
    INFO(run.output());
    CHECK(run.exit_status() == 1);
    const std::string error = run.error_line();
    REQUIRE_FALSE(error.empty());
    CHECK_THAT(error, Catch::Contains("(shared by pools) was reached by worker rank 0 (host"));
    CHECK_THAT(error, Catch::Contains("not by worker rank 3 (host"));
    CHECK_THAT(error, Catch::Contains("and it is in 'rollout.receive_weights' since"));
    const auto fault_at = run.seen_at("rlcore fault injection:");
    REQUIRE(fault_at);
    CHECK(std::chrono::duration<double>(*run.exited_at() - *fault_at).count() < 4.0 + 5.0);
  }
  CHECK(faults::children_left_after(5s).empty());
  fs::remove_all(ws);
}
