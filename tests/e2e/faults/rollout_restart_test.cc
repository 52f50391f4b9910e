// async_training.on_rollout_failure: restart (docs/async.md#faults): a fully
// asynchronous run whose standalone rollout pool of two loses a worker
// (SIGKILL) mid-run finishes every step; the run replaces the worker, resubmits
// its unfinished requests to the survivor, syncs the replacement at the next
// weight sync, and still learns. With `fail` (the default) the same fault ends
// the run naming the worker: loop_faults_test.
#include "../e2e_testing.h"
#include "faults_testing.h"

#include <sys/prctl.h>

#include <filesystem>
#include <regex>

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace rollout_restart {

// Two actor workers (ranks 0-1) and a rollout pool of two (ranks 2-3).
const char* const kRestart = R"(
async_training: {mode: fully_async, staleness_threshold: 0.5, trigger_parameter_sync_step: 2, partial_rollout: true,
                 decode_steps_per_call: 1, on_rollout_failure: restart}
rollout: {nnodes: 1, n_gpus_per_node: 2}
)";

}  // namespace rollout_restart

using namespace rollout_restart;

TEST_CASE("a lost rollout worker is replaced and the fully asynchronous run finishes, still learning",
          "[faults][async]") {
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  const std::string ws = e2e::make_workspace("rollout_restart");
  const std::string config = e2e::write_config(ws, "run", std::string(e2e::kLearningGrpo) + kRestart);
  // The 60th stream call of rollout rank 1 (global rank 3): during step 3 or 4 on the machines measured.
  faults::RlcoreProcess run({"--config", config, "trainer.total_training_steps=12"},
                            {"RLCORE_FAULT=rollout.stream:kill@3#60"});
  REQUIRE(run.finish(180s));
  INFO(run.output());
  REQUIRE(run.exit_status() == 0);
  std::smatch killed;
  REQUIRE(std::regex_search(run.output(), killed,
                            std::regex(R"(fault injection: kill at rollout\.stream on rank 3 \(pid (\d+)\))")));
  CHECK_THAT(run.output(), Catch::Contains("worker rank 3 (host") &&
                               Catch::Contains("pid " + killed[1].str() + ") of pool 'rollout', its rank 1 was lost") &&
                               Catch::Contains("starting a replacement (async_training.on_rollout_failure: restart)") &&
                               Catch::Contains("of pool 'rollout', its rank 1 replaced: pid"));

  const auto metrics = e2e::read_metrics(ws + "/run");
  REQUIRE(metrics.count(12) == 1);
  double lost_requests = 0, replaced = 0;
  for (const auto& [step, values] : metrics) {
    INFO("step " << step);
    lost_requests += values.at("async/lost_requests");
    if (values.count("async/rollout_workers_replaced")) {
      replaced += values.at("async/rollout_workers_replaced");
      CHECK(values.count("timing_s/rollout_rejoin") == 1);
    }
    CHECK(values.at("async/staleness/max") <= 3);  // the bound of async_e2e_test holds across the restart
  }
  CHECK(replaced == 1);
  CHECK(lost_requests > 0);
  CHECK(e2e::mean_over_steps(metrics, "critic/score/mean", 10, 12) >
        e2e::mean_over_steps(metrics, "critic/score/mean", 1, 3) + 0.2);
  CHECK(faults::children_left_after(5s).empty());
  fs::remove_all(ws);
}

TEST_CASE("on_rollout_failure restart outside fully_async is refused, saying why", "[faults][async]") {
  const std::string ws = e2e::make_workspace("rollout_restart_refused", 8);
  const std::string config = e2e::write_config(ws, "run", e2e::kQuickGrpo);
  e2e::RunResult run = e2e::run_rlcore({"--config", config, "async_training.on_rollout_failure=restart"});
  CHECK(run.status != 0);
  CHECK_THAT(run.output, Catch::Contains("async_training.on_rollout_failure: restart") &&
                             Catch::Contains("hybrid engine") && Catch::Contains("ends the run"));
  run = e2e::run_rlcore({"--config", config, "async_training.mode=one_step_off", "rollout.n_gpus_per_node=2",
                         "async_training.on_rollout_failure=restart"});
  CHECK(run.status != 0);
  CHECK_THAT(run.output, Catch::Contains("in mode one_step_off every step's generation is one call across the pool"));
  fs::remove_all(ws);
}
