// verl's decoupled rollout correction through the trainer: the off-policy
// metrics every step, importance weights and rejection when configured.
#include "e2e_testing.h"

#include <filesystem>

namespace fs = std::filesystem;

TEST_CASE("rollout correction: rollout_corr/ metrics always, IS weights and rejection when asked") {
  const std::string ws = e2e::make_workspace("rollout_corr", 16);
  const std::string config = e2e::write_config(ws, "corr", e2e::kQuickGrpo);
  SECTION("off: the off-policy gap is still reported") {
    const e2e::RunResult run = e2e::run_rlcore({"--config", config, "trainer.total_training_steps=1"});
    INFO(run.output);
    REQUIRE(run.status == 0);
    const auto metrics = e2e::read_metrics(ws + "/corr");
    REQUIRE(metrics.count(1) == 1);
    const auto& step = metrics.at(1);
    // Trainer and rollout run the same fp32 model here: the gap is round-off.
    CHECK(std::abs(step.at("rollout_corr/kl")) < 1e-3);
    CHECK(step.at("rollout_corr/training_ppl") > 1);
    CHECK(step.count("rollout_corr/rollout_is_mean") == 0);
  }
  SECTION("token TIS and token_k1 rejection") {
    const e2e::RunResult run = e2e::run_rlcore(
        {"--config", config, "trainer.total_training_steps=1", "algorithm.rollout_correction.rollout_is=token",
         "algorithm.rollout_correction.rollout_is_threshold=2.0", "algorithm.rollout_correction.rollout_rs=token_k1",
         "algorithm.rollout_correction.rollout_rs_threshold=0.5_2.0"});
    INFO(run.output);
    REQUIRE(run.status == 0);
    const auto metrics = e2e::read_metrics(ws + "/corr");
    REQUIRE(metrics.count(1) == 1);
    const auto& step = metrics.at(1);
    // Same model on both sides: every weight is 1 up to round-off, nothing is rejected.
    CHECK(step.at("rollout_corr/rollout_is_mean") == Approx(1.0).margin(1e-3));
    CHECK(step.at("rollout_corr/rollout_rs_masked_fraction") == 0.0);
    CHECK(step.count("rollout_corr/rollout_rs_token_k1_mean") == 1);
  }
  SECTION("a bad threshold or bypass_mode fails before any worker starts") {
    const e2e::RunResult bad = e2e::run_rlcore({"--config", config, "algorithm.rollout_correction.rollout_rs=token_k2",
                                                "algorithm.rollout_correction.rollout_rs_threshold=0.5_2.0"});
    CHECK(bad.status != 0);
    CHECK_THAT(bad.output, Catch::Contains("algorithm.rollout_correction.rollout_rs_threshold"));
    CHECK_THAT(bad.output, !Catch::Contains("workers ready"));
    const e2e::RunResult bypass =
        e2e::run_rlcore({"--config", config, "algorithm.rollout_correction.bypass_mode=true"});
    CHECK(bypass.status != 0);
    CHECK_THAT(bypass.output, Catch::Contains("algorithm.rollout_correction.bypass_mode"));
  }
  fs::remove_all(ws);
}
