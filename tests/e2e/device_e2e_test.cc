// trainer.device end to end: without CUDA (CPU build) or without a GPU (CUDA
// build here), cuda stops the run before its first step (RL and SFT), and cpu
// trains as before.
#include "e2e_testing.h"

#include <filesystem>

#include "rlcore/device.h"

namespace fs = std::filesystem;

namespace {

const char* kDeviceGrpo = R"(
actor_rollout_ref:
  actor: {ppo_mini_batch_size: 8, ppo_micro_batch_size_per_gpu: 8}
  rollout: {n: 2}
algorithm: {adv_estimator: grpo}
)";

}  // namespace

TEST_CASE("trainer.device=cuda fails before the first step without CUDA or a GPU; trainer.device=cpu trains") {
  const std::string ws = e2e::make_workspace("device", 8);
  const std::string config = e2e::write_config(ws, "device", kDeviceGrpo);
  // The CPU build refuses cuda outright; the CUDA build on a machine without a
  // GPU (CI) says it sees none. Either way before the first step.
  if (rlcore::cuda_device_count() == 0) {
    for (const std::string command : {"train", "sft"}) {
      INFO(command);
      std::vector<std::string> args = {"--config", config, "trainer.device=cuda"};
      if (command == "sft") args.insert(args.begin(), "sft");
      const e2e::RunResult run = e2e::run_rlcore(args);
      INFO(run.output);
      CHECK(run.status != 0);
      if (rlcore::cuda_build()) {
        CHECK_THAT(run.output, Catch::Contains("key trainer.device=cuda: this rlcore build has CUDA but this process "
                                               "sees no GPU"));
        CHECK_THAT(run.output, Catch::Contains("CUDA_VISIBLE_DEVICES"));
      } else {
        CHECK_THAT(run.output, Catch::Contains("key trainer.device=cuda: this rlcore build has no CUDA (libtorch "));
        CHECK_THAT(run.output, Catch::Contains("bash scripts/build.sh --cuda"));
      }
      CHECK_FALSE(fs::exists(ws + "/device/metrics.jsonl"));  // stopped before its first step
    }
  }
  const e2e::RunResult run =
      e2e::run_rlcore({"--config", config, "trainer.device=cpu", "trainer.total_training_steps=1"});
  INFO(run.output);
  REQUIRE(run.status == 0);
  CHECK(e2e::read_metrics(ws + "/device").size() == 1);
  fs::remove_all(ws);
}
