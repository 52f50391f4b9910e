// How batch sizes relate: bad combinations fail with messages that name every
// key involved and say how they relate.
#include "trainer/batch_plan.h"
#include "../../common/run_config_testing.h"

#include "rlcore/core/algorithms/builtin_algorithms.h"

using namespace rlcore;
using namespace rlcore::trainer;
using rlcore_test::error_of;
using rlcore_test::run_config;

namespace {

Registry builtin_registry() {
  Registry registry;
  algorithms::register_builtin_algorithms(registry);
  return registry;
}

const char* kGrpo = R"(
data: {train_batch_size: 8, max_response_length: 6}
algorithm: {adv_estimator: grpo}
actor_rollout_ref:
  rollout: {n: 4}
  actor: {ppo_mini_batch_size: 4, ppo_micro_batch_size_per_gpu: 2}
)";

}  // namespace

TEST_CASE("a consistent GRPO config gives the per-worker mini-batch") {
  const Registry registry = builtin_registry();
  const BatchPlan plan = make_batch_plan(run_config(kGrpo), registry, 100, 2, 0);
  CHECK(plan.responses_per_step == 32);
  CHECK(plan.actor_mini_batch_rows == 8);  // 4 prompts x 4 responses / 2 workers
  CHECK(plan.steps_per_epoch == 12);
  CHECK(plan.total_steps == 12);
  CHECK(plan.response_length == 6);
  CHECK_FALSE(plan.use_ref);
  CHECK(plan.needs.index);
  CHECK_FALSE(uses_critic(run_config(kGrpo), registry));
}

TEST_CASE("batch sizes that do not divide name the keys and their relation") {
  const Registry registry = builtin_registry();
  config::RunConfig config = run_config(kGrpo);
  config.actor_rollout_ref.actor.ppo_mini_batch_size = 3;
  CHECK_THAT(error_of<ConfigError>([&] { make_batch_plan(config, registry, 100, 1, 0); }),
             Catch::Contains(
                 "data.train_batch_size (8) must be a multiple of actor_rollout_ref.actor.ppo_mini_batch_size (3)"));

  config = run_config(kGrpo);
  CHECK_THAT(error_of<ConfigError>([&] { make_batch_plan(config, registry, 100, 3, 0); }),
             Catch::Contains("x actor_rollout_ref.rollout.n (4) = 16 responses per mini-batch must split evenly over "
                             "the 3 data-parallel ranks"));

  config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 3;
  CHECK_THAT(error_of<ConfigError>([&] { make_batch_plan(config, registry, 100, 2, 0); }),
             Catch::Contains("ppo_micro_batch_size_per_gpu (3) must divide the 8 responses"));
}

TEST_CASE("estimators and their needs are checked against the config") {
  const Registry registry = builtin_registry();
  config::RunConfig config = run_config(kGrpo);
  config.algorithm.adv_estimator = "grpoo";
  CHECK_THAT(error_of<ConfigError>([&] { make_batch_plan(config, registry, 100, 1, 0); }),
             Catch::Contains("'grpoo' is not a registered advantage estimator") && Catch::Contains("rloo"));

  config = run_config(kGrpo);
  config.actor_rollout_ref.rollout.n = 1;
  CHECK_THAT(error_of<ConfigError>([&] { make_batch_plan(config, registry, 100, 1, 0); }),
             Catch::Contains("rollout.n must be at least 2"));

  config = run_config(kGrpo);
  config.algorithm.adv_estimator = "gae";
  CHECK(uses_critic(config, registry));
  CHECK_THAT(error_of<ConfigError>([&] { make_batch_plan(config, registry, 100, 1, 0); }),
             Catch::Contains("needs a critic's values"));
  const BatchPlan plan = make_batch_plan(config, registry, 100, 1, 2);
  CHECK(plan.critic_mini_batch_rows == 8);
}

TEST_CASE("n = 0 and a batch larger than the dataset are refused") {
  const Registry registry = builtin_registry();
  CHECK_THAT(error_of<ConfigError>([&] { run_config("actor_rollout_ref: {rollout: {n: 0}}"); }),
             Catch::Contains("actor_rollout_ref.rollout.n"));
  CHECK_THAT(error_of<ConfigError>([&] { make_batch_plan(run_config(kGrpo), registry, 5, 1, 0); }),
             Catch::Contains("larger than the training set (5 prompts"));
}

TEST_CASE("a KL loss or an in-reward KL needs the reference policy") {
  const Registry registry = builtin_registry();
  config::RunConfig config = run_config(kGrpo);
  config.actor_rollout_ref.actor.use_kl_loss = true;
  CHECK(make_batch_plan(config, registry, 100, 1, 0).use_ref);
  config = run_config(kGrpo);
  config.algorithm.use_kl_in_reward = true;
  CHECK(make_batch_plan(config, registry, 100, 1, 0).use_ref);
}
