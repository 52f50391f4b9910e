// KL coefficient controllers and the in-reward KL penalty (rlcore/kl_controller.h).
#include "../common/algorithms_testing.h"

#include "rlcore/config_node.h"
#include "rlcore/error.h"
#include "rlcore/kl_controller.h"

using namespace rlcore_test;

TEST_CASE("the fixed KL controller never moves", "[algorithms]") {
  rlcore::FixedKlController controller(0.05);
  controller.update(10.0, 1000);
  CHECK(controller.value() == 0.05);
}

TEST_CASE("the adaptive KL controller follows Ziegler et al.'s proportional rule", "[algorithms]") {
  rlcore::AdaptiveKlController controller(0.2, /*target_kl=*/0.1, /*horizon=*/100);
  // error = clip(0.15 / 0.1 - 1, -0.2, 0.2) = 0.2; value *= 1 + 0.2 * 10 / 100
  controller.update(0.15, 10);
  CHECK(controller.value() == Approx(0.2 * 1.02));
  // error = 0.09 / 0.1 - 1 = -0.1 (inside the clip); value *= 1 - 0.1 * 10 / 100
  controller.update(0.09, 10);
  CHECK(controller.value() == Approx(0.2 * 1.02 * 0.99));
  // error clipped at -0.2 for a KL of 0.
  controller.update(0.0, 50);
  CHECK(controller.value() == Approx(0.2 * 1.02 * 0.99 * 0.9));

  CHECK_THAT(error_of<rlcore::ValueError>([] { rlcore::AdaptiveKlController(0.1, 0.1, 0); }),
             Catch::Contains("horizon"));
}

TEST_CASE("make_kl_controller builds from algorithm.kl_ctrl", "[algorithms]") {
  const auto config = rlcore::kl_control_schema().parse(
      rlcore::ConfigNode::parse("type: adaptive\nkl_coef: 0.3\ntarget_kl: 0.5\nhorizon: 20\n", "test"));
  auto controller = rlcore::make_kl_controller(config);
  CHECK(controller->value() == 0.3);
  controller->update(1.0, 10);  // error clipped at 0.2: 0.3 * (1 + 0.2 * 10 / 20)
  CHECK(controller->value() == Approx(0.33));
  CHECK(rlcore::make_kl_controller(rlcore::KlControlConfig{})->value() == 0.001);  // verl's default

  rlcore::KlControlConfig bad;
  bad.type = "pid";
  CHECK_THAT(error_of<rlcore::ValueError>([&] { rlcore::make_kl_controller(bad); }), Catch::Contains("'pid'"));
  CHECK_THROWS_AS(rlcore::kl_control_schema().parse(rlcore::ConfigNode::parse("type: pid\n", "test")),
                  rlcore::ConfigError);
}

TEST_CASE("apply_kl_penalty subtracts beta * KL on response tokens and updates the controller", "[algorithms]") {
  const at::Tensor scores = tensor(Matrix{{0, 0, 1}, {0, 1, 0}}, at::kFloat);
  const at::Tensor old_log_prob = tensor(Matrix{{-1, -1, -1}, {-1, -1, -1}}, at::kFloat);
  const at::Tensor ref_log_prob = tensor(Matrix{{-1.5, -1, -0.5}, {-2, -1, -3}}, at::kFloat);
  const at::Tensor mask = tensor(Matrix{{1, 1, 1}, {1, 1, 0}}, at::kLong);
  rlcore::AdaptiveKlController controller(0.1, /*target_kl=*/0.5, /*horizon=*/10);

  const auto result = rlcore::apply_kl_penalty(scores, old_log_prob, ref_log_prob, mask, controller, "kl");
  // kl = old - ref = [[0.5, 0, -0.5], [1, 0, (masked)]]
  check_close(result.token_level_rewards, Matrix{{-0.05, 0, 1.05}, {-0.1, 1, 0}}, 1e-6);
  CHECK(result.beta == 0.1);
  CHECK(result.current_kl == Approx((0.0 / 3 + 1.0 / 2) / 2));  // mean of the rows' masked means
  // error = 0.25 / 0.5 - 1 = -0.5 -> -0.2; two samples over a horizon of 10.
  CHECK(controller.value() == Approx(0.1 * (1 - 0.2 * 2 / 10)));
  CHECK(result.token_level_rewards.scalar_type() == at::kFloat);

  CHECK_THAT(error_of<rlcore::ValueError>([&] {
               rlcore::apply_kl_penalty(scores, old_log_prob, ref_log_prob.slice(1, 0, 2), mask, controller);
             }),
             Catch::Contains("ref_log_prob"));
}
