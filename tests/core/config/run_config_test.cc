// resolve_config's cross-key rules: the default pool's size under verl's and
// rlcore's names, trainer.device checked before any worker starts, and validate(RunConfig).
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "rlcore/core/config/run_config.h"
#include "rlcore/device.h"
#include "rlcore/error.h"

namespace {

namespace fs = std::filesystem;

rlcore::config::ResolvedConfig resolve(const std::vector<std::string>& overrides, const std::string& file = "") {
  return rlcore::config::resolve_config(rlcore::Registry(), file, overrides);
}

std::string config_error_of(const std::vector<std::string>& overrides, const std::string& file = "") {
  try {
    resolve(overrides, file);
  } catch (const rlcore::ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

// A config file that sizes the pool with rlcore's own key, as configs/*.yaml do.
struct RuntimeFile {
  RuntimeFile() { std::ofstream(path) << "runtime:\n  n_workers_per_node: 2\n"; }
  ~RuntimeFile() { fs::remove(path); }
  std::string path = (fs::temp_directory_path() / ("run_config_test_" + std::to_string(::getpid()) + ".yaml")).string();
};

}  // namespace

TEST_CASE("trainer.n_gpus_per_node and runtime.n_workers_per_node are one number: either sets it", "[config]") {
  auto resolved = resolve({});
  CHECK(resolved.config.runtime.n_workers_per_node == 1);
  CHECK(resolved.config.trainer.n_gpus_per_node == 1);

  resolved = resolve({"trainer.n_gpus_per_node=4", "trainer.nnodes=2"});
  CHECK(resolved.config.runtime.n_workers_per_node == 4);
  CHECK(resolved.config.runtime.nnodes == 2);
  // The printed config shows the size used under both names.
  CHECK(resolved.tree.at_path("runtime.n_workers_per_node").as<int64_t>() == 4);
  CHECK(resolved.tree.at_path("runtime.nnodes").as<int64_t>() == 2);

  resolved = resolve({"runtime.n_workers_per_node=3"});
  CHECK(resolved.config.trainer.n_gpus_per_node == 3);
  CHECK(resolved.tree.at_path("trainer.n_gpus_per_node").as<int64_t>() == 3);

  CHECK(resolve({"trainer.n_gpus_per_node=2", "runtime.n_workers_per_node=2"}).config.runtime.n_workers_per_node == 2);
}

TEST_CASE("the pool size set closer to the command line wins; both at one level and different is an error",
          "[config]") {
  const RuntimeFile file;
  CHECK(resolve({}, file.path).config.trainer.n_gpus_per_node == 2);
  // An override of verl's name beats the file's runtime.n_workers_per_node.
  CHECK(resolve({"trainer.n_gpus_per_node=4"}, file.path).config.runtime.n_workers_per_node == 4);

  const std::string message = config_error_of({"trainer.n_gpus_per_node=4", "runtime.n_workers_per_node=2"});
  CHECK_THAT(message, Catch::Contains("'trainer.n_gpus_per_node'") && Catch::Contains("= 4"));
  CHECK_THAT(message, Catch::Contains("'runtime.n_workers_per_node'") && Catch::Contains("= 2"));
  CHECK_THAT(message, Catch::Contains("both size the default pool and differ"));
  CHECK_THAT(config_error_of({"trainer.nnodes=2", "runtime.nnodes=3"}), Catch::Contains("'trainer.nnodes'"));
}

TEST_CASE("trainer.device: auto by default, one of auto|cpu|cuda, cuda refused at config time without CUDA",
          "[config]") {
  CHECK(resolve({}).config.trainer.device == "auto");
  CHECK(resolve({"trainer.device=cpu"}).config.trainer.device == "cpu");
  CHECK_THAT(config_error_of({"trainer.device=gpu"}), Catch::Contains("trainer.device") && Catch::Contains("cuda"));
  if (rlcore::cuda_build()) return;  // the CUDA build resolves the GPU per worker
  const std::string message = config_error_of({"trainer.device=cuda"});
  CHECK_THAT(message, Catch::Contains("key trainer.device=cuda: this rlcore build has no CUDA"));
  CHECK_THAT(message, Catch::Contains("bash scripts/build.sh --cuda"));
}

TEST_CASE("validate(RunConfig): the sections' own checks and those across sections, before any worker starts",
          "[config]") {
  CHECK_THAT(config_error_of({"async_training.max_staleness=2"}),
             Catch::Contains("async_training.max_staleness applies to async_training.mode: fully_async"));
  CHECK_THAT(config_error_of({"async_training.mode=fully_async", "async_training.max_staleness=1"}),
             Catch::Contains("async_training.max_staleness 1 is below trigger_parameter_sync_step - 1 (3)"));
  CHECK_THAT(config_error_of({"async_training.mode=one_step_off", "algorithm.filter_groups.enable=true"}),
             Catch::Contains("one_step_off does not run algorithm.filter_groups"));
  CHECK_THAT(config_error_of({"async_training.mode=fully_async", "actor_rollout_ref.rollout.multi_turn.enable=true"}),
             Catch::Contains("fully_async does not run actor_rollout_ref.rollout.multi_turn"));
  CHECK_THAT(config_error_of({"algorithm.rollout_correction.bypass_mode=true"}),
             Catch::Contains("algorithm.rollout_correction.bypass_mode: rlcore has no bypass mode"));
  CHECK_THAT(config_error_of({"trainer.check_exact_logprobs=true"}),
             Catch::Contains("trainer.check_exact_logprobs needs actor_rollout_ref.rollout.exact_logprobs: true"));
  CHECK_THAT(config_error_of({"async_training.on_rollout_failure=restart"}),
             Catch::Contains("async_training.on_rollout_failure: restart replaces a worker of the standalone rollout "
                             "pool of async_training.mode fully_async; in mode sync"));
  CHECK_NOTHROW(resolve({"async_training.mode=fully_async", "async_training.max_staleness=3"}));
}
