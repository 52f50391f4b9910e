// A run directory on a read-only or full disk stops the run before any worker
// starts; a disk that fills during a save is a named error and leaves no
// checkpoint a resume would take. Each case mounts a small tmpfs in a private
// user and mount namespace (`unshare -rm`), so no root is needed.
#include "../e2e_testing.h"

#include <filesystem>

namespace fs = std::filesystem;

namespace {

// A shell prefix for run_rlcore: mounts a tmpfs at `dir` with `mount_options`,
// runs `prepare` there, then rlcore; prints rlcore's status and what
// `dir`/run/checkpoints holds afterwards (the mount vanishes with the namespace).
std::string on_small_disk(const std::string& dir, const std::string& mount_options, const std::string& prepare) {
  const std::string script =
      "mount -t tmpfs -o " + mount_options + " tmpfs \"$D\" || exit 99; " + prepare +
      "\"$0\" \"$@\"; echo \"rlcore exit=$?\"; echo checkpoints:; ls -A \"$D/run/checkpoints\" 2>&1";
  return "D=" + e2e::shell_quote(dir) + " unshare -rm sh -c " + e2e::shell_quote(script);
}

}  // namespace

TEST_CASE("an unwritable or full run directory stops the run before any worker starts", "[faults][disk]") {
  const std::string ws = e2e::make_workspace("run_dir", 16);
  const std::string config = e2e::write_config(ws, "run", e2e::kQuickGrpo);
  const std::string disk = ws + "/disk";
  fs::create_directories(disk);
  const std::vector<std::string> args = {"--config", config, "trainer.default_local_dir=" + disk + "/run",
                                         "trainer.total_training_steps=1"};
  struct Case {
    const char* mount_options;
    const char* prepare;
    const char* reason;
  };
  for (const Case& c : {Case{"ro,size=1m", "", "Read-only file system"},
                        Case{"size=256k", "cat /dev/zero > \"$D/filler\" 2>/dev/null; ", "No space left on device"}}) {
    const e2e::RunResult run = e2e::run_rlcore(args, on_small_disk(disk, c.mount_options, c.prepare));
    INFO(run.output);
    REQUIRE_THAT(run.output, Catch::Contains("rlcore exit=1"));
    CHECK_THAT(run.output, Catch::Contains("trainer.default_local_dir '" + disk + "/run' is not writable") &&
                               Catch::Contains(c.reason));
    CHECK_THAT(run.output, !Catch::Contains("workers ready"));
  }
  fs::remove_all(ws);
}

TEST_CASE("a disk that fills during a save is a named error and no checkpoint looks complete", "[faults][disk]") {
  const std::string ws = e2e::make_workspace("full_at_save", 16);
  const std::string config = e2e::write_config(ws, "run", e2e::kQuickGrpo);
  const std::string disk = ws + "/disk";
  fs::create_directories(disk);
  // Room for the metrics, not for the ~10 MB checkpoint of the tiny model.
  const e2e::RunResult run = e2e::run_rlcore({"--config", config, "trainer.default_local_dir=" + disk + "/run",
                                              "trainer.total_training_steps=1", "trainer.save_freq=1"},
                                             on_small_disk(disk, "size=2m", ""));
  INFO(run.output);
  REQUIRE_THAT(run.output, Catch::Contains("rlcore exit=1"));
  CHECK_THAT(run.output, Catch::Contains("workers ready"));
  CHECK_THAT(run.output, Catch::Contains("'actor.save_checkpoint' failed") &&
                             Catch::Contains(".safetensors: write failed: No space left on device"));
  const std::string listing = run.output.substr(run.output.find("checkpoints:\n"));
  CHECK_THAT(listing, !Catch::Contains("global_step_1\n"));
  CHECK_THAT(listing, !Catch::Contains("latest_checkpointed_iteration.txt"));
  fs::remove_all(ws);
}
