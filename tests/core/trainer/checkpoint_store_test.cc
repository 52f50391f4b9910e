// The trainer's checkpoint directories: complete ones only, newest wins, old ones pruned.
#include "trainer/checkpoint.h"
#include "../../common/run_config_testing.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "rlcore/error.h"

using namespace rlcore;
using namespace rlcore::trainer;
using rlcore_test::error_of;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("rlcore_ckpt_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

}  // namespace

TEST_CASE("a committed checkpoint is the latest and restores its state") {
  const fs::path run = fresh_dir("commit");
  CheckpointStore store(run.string());
  CHECK_FALSE(store.latest().has_value());
  const std::string staging = store.staging_dir(3);
  std::ofstream(fs::path(staging) / "engine.bin") << "weights";
  const std::string final_dir = store.commit(3, TrainerState{3, data::SamplerState{1, 2}, 0.05}, 0);
  CHECK(fs::exists(fs::path(final_dir) / "engine.bin"));
  CHECK_FALSE(fs::exists(staging));
  REQUIRE(store.latest() == final_dir);
  const TrainerState state = CheckpointStore::read_state(final_dir);
  CHECK(state.step == 3);
  CHECK(state.sampler.epoch == 1);
  CHECK(state.sampler.position == 2);
  CHECK(state.kl_coef == 0.05);
  fs::remove_all(run);
}

TEST_CASE("an unfinished save is never the latest; old ones are pruned") {
  const fs::path run = fresh_dir("prune");
  CheckpointStore store(run.string());
  for (int64_t step : {1, 2, 3}) {
    store.staging_dir(step);
    store.commit(step, TrainerState{step, {}, 0.0}, 2);
  }
  store.staging_dir(4);  // a crash while saving step 4
  CHECK(store.latest() == (fs::path(store.root()) / "global_step_3").string());
  CHECK_FALSE(fs::exists(fs::path(store.root()) / "global_step_1"));
  CHECK(fs::exists(fs::path(store.root()) / "global_step_2"));
  fs::remove_all(run);
}

TEST_CASE("a corrupt trainer state names its file") {
  const fs::path run = fresh_dir("corrupt");
  CheckpointStore store(run.string());
  store.staging_dir(1);
  const std::string dir = store.commit(1, TrainerState{}, 0);
  std::ofstream(fs::path(dir) / "trainer_state.json") << "{\"step\": ";
  CHECK_THAT(error_of<FormatError>([&] { CheckpointStore::read_state(dir); }), Catch::Contains("trainer_state.json"));
  fs::remove_all(run);
}

TEST_CASE("the newest complete checkpoint wins over a lagging marker and an incomplete directory") {
  const fs::path run = fresh_dir("lagging");
  CheckpointStore store(run.string());
  for (int64_t step : {1, 2}) {
    store.staging_dir(step);
    store.commit(step, TrainerState{step, {}, 0.0}, 0);
  }
  // A crash between the rename of step 2 and the marker's update.
  std::ofstream(fs::path(store.root()) / "latest_checkpointed_iteration.txt") << "1\n";
  fs::create_directories(fs::path(store.root()) / "global_step_7");  // no trainer state: not a checkpoint
  CHECK(store.latest() == (fs::path(store.root()) / "global_step_2").string());
  fs::remove_all(run);
}

TEST_CASE("a new save removes what interrupted saves left") {
  const fs::path run = fresh_dir("leftovers");
  CheckpointStore store(run.string());
  store.staging_dir(4);
  std::ofstream(fs::path(store.staging_dir(9)) / "rank_0.safetensors") << "half";
  store.staging_dir(5);
  CHECK_FALSE(fs::exists(fs::path(store.root()) / "global_step_4.partial"));
  CHECK_FALSE(fs::exists(fs::path(store.root()) / "global_step_9.partial"));
  CHECK(fs::exists(fs::path(store.root()) / "global_step_5.partial"));
  fs::remove_all(run);
}

TEST_CASE("a run directory that cannot be made is refused, naming the key and the reason") {
  const fs::path run = fresh_dir("unwritable");
  fs::create_directories(run);
  std::ofstream(run / "a_file") << "x";
  const std::string dir = (run / "a_file" / "run").string();
  CHECK_THAT(
      error_of<IoError>([&] { check_run_dir_writable(dir); }),
      Catch::Contains("trainer.default_local_dir '" + dir + "' is not writable") && Catch::Contains("Not a directory"));
  check_run_dir_writable((run / "fine").string());
  CHECK(fs::is_empty(run / "fine"));  // the probe is gone
  fs::remove_all(run);
}
