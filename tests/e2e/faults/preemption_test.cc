// Preemption (docs/launch.md#preemption): the first SIGTERM finishes the step,
// checkpoints and exits with 75; the resumed run ends on the weights of a run
// never interrupted, bit for bit; srun-style signalling reaches the workers
// too, which wait for the controller; on_preempt exit abandons the step. No
// process outlives a run.
#include <sys/prctl.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "../e2e_testing.h"
#include "faults_testing.h"
#include "rlcore/core/runtime/preemption.h"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

std::string bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every tensor file under `expected` (the weights and the optimizer's
// moments) exists under `actual` with the same bytes. The rank files' RNG
// states are left out: a worker process's generator starts from its own state,
// which nothing in these steps draws from.
void check_same_tensors(const fs::path& expected, const fs::path& actual) {
  std::size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(expected)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".safetensors") continue;
    const fs::path relative = fs::relative(entry.path(), expected);
    INFO(relative.string());
    REQUIRE(fs::exists(actual / relative));
    CHECK(bytes_of(entry.path()) == bytes_of(actual / relative));
    ++files;
  }
  CHECK(files > 0);
}

std::vector<std::string> run_args(const std::string& config, const std::string& dir) {
  return {"--config", config, "trainer.total_training_steps=4", "trainer.save_freq=4",
          "trainer.default_local_dir=" + dir};
}

}  // namespace

TEST_CASE("SIGTERM mid-step: the step ends, a checkpoint, status 75; resumed, the weights are the uninterrupted run's",
          "[faults][preemption]") {
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  const std::string quick_one_step_off = std::string(e2e::kQuickGrpo) + R"(
async_training: {mode: one_step_off}
rollout: {nnodes: 1, n_gpus_per_node: 2}
)";
  for (const auto& [mode, yaml] : {std::pair<std::string, std::string>{"sync", e2e::kQuickGrpo},
                                   std::pair<std::string, std::string>{"one_step_off", quick_one_step_off}}) {
    INFO("async_training.mode " << mode);
    const std::string ws = e2e::make_workspace("preempt_" + mode, 16);
    const std::string config = e2e::write_config(ws, "run", yaml);

    const e2e::RunResult full = e2e::run_rlcore(run_args(config, ws + "/full"));
    INFO(full.output);
    REQUIRE(full.status == 0);

    int64_t step = 0;
    {
      // The controller signals itself after its second generation.
      faults::RlcoreProcess run(run_args(config, ws + "/preempted"),
                                {"RLCORE_FAULT=trainer.generated:term@controller#2"});
      REQUIRE(run.finish(180s));
      INFO(run.output());
      CHECK(run.exit_status() == rlcore::runtime::kExitPreempted);
      const std::string said = "rlcore: preempted by SIGTERM after step ";
      const auto at = run.output().find(said);
      REQUIRE(at != std::string::npos);
      step = std::stoll(run.output().substr(at + said.size()));
      // write_config's runs start afresh: the message says how to resume.
      CHECK_THAT(run.output(),
                 Catch::Contains("(the same command with trainer.resume_mode=auto; this run has disable)"));
    }
    CHECK(step >= 1);
    CHECK(step < 4);
    CHECK(fs::exists(ws + "/preempted/checkpoints/global_step_" + std::to_string(step) + "/trainer_state.json"));
    CHECK_FALSE(fs::exists(ws + "/preempted/checkpoints/global_step_4"));
    CHECK(faults::children_left_after(10s).empty());

    // The requeued job: the same command, resuming from the run directory.
    std::vector<std::string> again = run_args(config, ws + "/preempted");
    again.push_back("trainer.resume_mode=auto");
    const e2e::RunResult resumed = e2e::run_rlcore(again);
    INFO(resumed.output);
    REQUIRE(resumed.status == 0);
    CHECK_THAT(resumed.output, Catch::Contains("resumed from"));
    check_same_tensors(ws + "/full/checkpoints/global_step_4/actor", ws + "/preempted/checkpoints/global_step_4/actor");
    fs::remove_all(ws);
  }
}

TEST_CASE("srun-style: every task gets SIGTERM, the workers wait for the controller, the run checkpoints",
          "[faults][preemption]") {
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  const std::string ws = e2e::make_workspace("preempt_group", 16);
  const std::string config = e2e::write_config(ws, "run", e2e::kQuickGrpo);
  int64_t step = 0;
  {
    faults::RlcoreProcess run(run_args(config, ws + "/run"), {}, /*own_group=*/true);
    REQUIRE(run.wait_for_output("step 1 |", 120s));
    ::kill(-run.pid(), SIGTERM);  // the step in progress finishes, then the checkpoint
    REQUIRE(run.finish(180s));
    INFO(run.output());
    CHECK(run.exit_status() == rlcore::runtime::kExitPreempted);
    CHECK_THAT(run.output(), Catch::Contains("worker rank 0: termination signal: waiting for the controller's word"));
    CHECK_THAT(run.output(), Catch::Contains("worker rank 1: termination signal: waiting for the controller's word"));
    const std::string said = "rlcore: preempted by SIGTERM after step ";
    const auto at = run.output().find(said);
    REQUIRE(at != std::string::npos);
    step = std::stoll(run.output().substr(at + said.size()));
  }
  CHECK(step >= 1);
  CHECK(step < 4);  // stopped early, not at the run's end
  CHECK(fs::exists(ws + "/run/checkpoints/global_step_" + std::to_string(step) + "/trainer_state.json"));
  CHECK(faults::children_left_after(10s).empty());
  fs::remove_all(ws);
}

TEST_CASE("on_preempt exit abandons the step: status 75 at once, no checkpoint", "[faults][preemption]") {
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  const std::string ws = e2e::make_workspace("preempt_exit", 16);
  const std::string config = e2e::write_config(ws, "run", e2e::kQuickGrpo);
  std::vector<std::string> args = run_args(config, ws + "/run");
  args.push_back("trainer.on_preempt=exit");
  {
    faults::RlcoreProcess run(args, {"RLCORE_FAULT=trainer.generated:term@controller#1"});
    REQUIRE(run.finish(180s));
    INFO(run.output());
    CHECK(run.exit_status() == rlcore::runtime::kExitPreempted);
    CHECK_THAT(run.output(), Catch::Contains("trainer.on_preempt is exit: abandoning the run now"));
  }
  CHECK_FALSE(fs::exists(ws + "/run/checkpoints"));
  CHECK(faults::children_left_after(10s).empty());
  fs::remove_all(ws);
}
