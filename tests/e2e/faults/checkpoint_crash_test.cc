// A checkpoint save interrupted at any point, by the controller's death or a
// worker's, leaves the previous checkpoint loadable, and resume_mode auto
// continues from the last complete one.
#include "../e2e_testing.h"

#include <filesystem>
#include <map>

namespace fs = std::filesystem;

namespace {

struct Interruption {
  const char* fault;  // RLCORE_FAULT: every point is reached during the save of step 2
  int64_t resumes_at;
};

const Interruption kInterruptions[] = {
    // The controller, between the engines' files and the commit's steps.
    {"checkpoint.commit.engines_saved:kill@controller#2", 1},
    {"checkpoint.commit.state_written:kill@controller#2", 1},
    // Step 2 is complete once renamed; only the marker file lags behind it.
    {"checkpoint.commit.renamed:kill@controller#2", 2},
    // A worker, before writing and after writing its own files.
    {"actor.save_checkpoint:kill@1#2", 1},
    {"fsdp.save_checkpoint.rank_files_written:kill@0#2", 1},
    {"fsdp.save_checkpoint.rank_files_written:segv@1#2", 1},
};

std::vector<std::string> checkpoint_entries(const fs::path& root) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(root)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("a save interrupted at any point leaves the last complete checkpoint, and auto resume uses it",
          "[faults][checkpoint]") {
  const std::string ws = e2e::make_workspace("checkpoint_crash", 32);
  const std::string config = e2e::write_config(ws, "run", e2e::kQuickGrpo);
  int index = 0;
  for (const Interruption& interruption : kInterruptions) {
    INFO("RLCORE_FAULT=" << interruption.fault);
    const std::string run_dir = ws + "/run_" + std::to_string(index++);
    const std::vector<std::string> args = {"--config", config, "trainer.default_local_dir=" + run_dir,
                                           "trainer.save_freq=1"};
    std::vector<std::string> crashing = args;
    crashing.push_back("trainer.total_training_steps=2");
    const e2e::RunResult crashed = e2e::run_rlcore(crashing, "RLCORE_FAULT=" + e2e::shell_quote(interruption.fault));
    INFO(crashed.output);
    REQUIRE(crashed.status != 0);
    REQUIRE_THAT(crashed.output, Catch::Contains("rlcore fault injection"));
    const fs::path root = fs::path(run_dir) / "checkpoints";
    INFO("left behind: " << Catch::Detail::stringify(checkpoint_entries(root)));
    CHECK(fs::exists(root / "global_step_1" / "trainer_state.json"));
    CHECK(fs::exists(root / "global_step_2") == (interruption.resumes_at == 2));

    std::vector<std::string> resuming = args;
    resuming.insert(resuming.end(), {"trainer.total_training_steps=3", "trainer.resume_mode=auto"});
    const e2e::RunResult resumed = e2e::run_rlcore(resuming);
    INFO(resumed.output);
    REQUIRE(resumed.status == 0);
    const std::string step = std::to_string(interruption.resumes_at);
    CHECK_THAT(resumed.output, Catch::Contains("global_step_" + step + " (step " + step + ")"));
    CHECK(fs::exists(root / "global_step_3" / "trainer_state.json"));
    for (const std::string& name : checkpoint_entries(root)) CHECK_THAT(name, !Catch::EndsWith(".partial"));
    const auto metrics = e2e::read_metrics(run_dir);
    CHECK(metrics.count(3) == 1);
  }
  fs::remove_all(ws);
}
