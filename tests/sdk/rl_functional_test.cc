// The shared RL functions (rlcore/rl_functional.h) on hand-worked numbers:
// masked statistics, group statistics, every loss aggregation mode and its
// parallel-layout invariance, entropy, the KL estimators and the value loss.
#include "../common/algorithms_testing.h"

#include <cmath>
#include <limits>

#include "rlcore/error.h"
#include "rlcore/rl_functional.h"

using namespace rlcore_test;
using rlcore::LossAggregation;

TEST_CASE("masked_sum and masked_mean ignore what the mask excludes, NaN included", "[algorithms]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const at::Tensor values = tensor(Matrix{{1, 2, nan}, {4, 5, 6}});
  const at::Tensor mask = tensor(Matrix{{1, 1, 0}, {1, 0, 1}}).to(at::kBool);
  CHECK(scalar(rlcore::masked_sum(values, mask)) == Approx(13));
  CHECK(scalar(rlcore::masked_mean(values, mask)) == Approx(13.0 / (4 + 1e-8)));
  check_close(rlcore::masked_mean(values, mask, -1).unsqueeze(0), Matrix{{1.5, 5.0}}, 1e-7);
  // An empty mask gives 0 (the 1e-8 guard), not NaN.
  CHECK(scalar(rlcore::masked_mean(values, at::zeros_like(mask))) == 0.0);
}

TEST_CASE("masked_var and masked_whiten use the unbiased variance over the mask", "[algorithms]") {
  const at::Tensor values = tensor(Matrix{{1, 2, 3, 100}});
  const at::Tensor mask = tensor(Matrix{{1, 1, 1, 0}});
  CHECK(scalar(rlcore::masked_var(values, mask)) == Approx(1.0));
  CHECK(scalar(rlcore::masked_var(values, mask, /*unbiased=*/false)) == Approx(2.0 / 3.0));
  // mean 2, unbiased variance 1 (up to verl's 1e-8 guards, hence the tolerance).
  // The excluded position is whitened with the same statistics, not zeroed (verl).
  check_close(rlcore::masked_whiten(values, mask), Matrix{{-1, 0, 1, 98}}, 1e-6);
  check_close(rlcore::masked_whiten(values, mask, /*shift_mean=*/false), Matrix{{1, 2, 3, 100}}, 1e-6);
  check_close(rlcore::masked_whiten(values, mask), whiten_ref(matrix(values), matrix(mask)), 1e-12);
  CHECK_THAT(error_of<rlcore::ValueError>([&] {
               rlcore::masked_var(values, tensor(Matrix{{0, 1, 0, 0}}));
             }),
             Catch::Contains("one element"));
  CHECK_THAT(error_of<rlcore::ValueError>([&] {
               rlcore::masked_whiten(values, tensor(Matrix{{0, 0, 0, 0}}));
             }),
             Catch::Contains("no element"));
}

TEST_CASE("group_stats groups rows by index wherever they are", "[algorithms]") {
  const Row scores = {1, 5, 2, 7, 3, 4};
  const std::vector<int64_t> index = {9, 2, 9, 2, 9, 40};
  const rlcore::GroupStats stats = rlcore::group_stats(tensor(scores), index_tensor(index));
  const auto groups = groups_of(index);
  for (size_t row = 0; row < scores.size(); ++row) {
    const auto& members = groups.at(index[row]);
    INFO("row " << row);
    CHECK(stats.count[row].item<double>() == Approx(members.size()));
    CHECK(stats.mean[row].item<double>() == Approx(mean_of(scores, members)));
    const double expected_std = members.size() > 1 ? std_of(scores, members) : 0.0;
    CHECK(stats.stddev[row].item<double>() == Approx(expected_std));
  }
  CHECK_THROWS_AS(rlcore::group_stats(tensor(scores), tensor(Row{1, 2, 3, 4, 5, 6})), rlcore::ValueError);
  CHECK_THROWS_AS(rlcore::group_stats(tensor(scores), index_tensor({1, 2})), rlcore::ValueError);
}

TEST_CASE("agg_loss implements every verl loss_agg_mode", "[algorithms]") {
  // Row 2 is fully masked: it counts neither as tokens nor as a sequence.
  const at::Tensor loss = tensor(Matrix{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}});
  const at::Tensor mask = tensor(Matrix{{1, 1, 0}, {1, 1, 1}, {0, 0, 0}});
  auto agg = [&](const std::string& mode, LossAggregation a = {}) {
    a.mode = mode;
    return scalar(rlcore::agg_loss(loss, mask, a));
  };
  CHECK(agg("token-mean") == Approx(18.0 / 5));
  CHECK(agg("token-sum") == Approx(18.0));
  CHECK(agg("seq-mean-token-sum") == Approx((3.0 + 15.0) / 2));
  CHECK(agg("seq-mean-token-sum-norm") == Approx((3.0 + 15.0) / 2 / 3));  // default factor: T = 3
  LossAggregation scaled;
  scaled.loss_scale_factor = 6;
  CHECK(agg("seq-mean-token-sum-norm", scaled) == Approx((3.0 + 15.0) / 2 / 6));
  CHECK(agg("seq-mean-token-mean") == Approx((1.5 + 5.0) / 2));

  LossAggregation global;
  global.dp_size = 3;
  global.batch_num_tokens = 9;
  global.global_batch_size = 4;
  CHECK(agg("token-mean", global) == Approx(18.0 / 9 * 3));
  CHECK(agg("token-sum", global) == Approx(18.0 * 3));
  CHECK(agg("seq-mean-token-sum", global) == Approx(18.0 / 4 * 3));
  CHECK(agg("seq-mean-token-mean", global) == Approx(6.5 / 4 * 3));
}

TEST_CASE("agg_loss with global counts does not depend on the parallel layout", "[algorithms]") {
  at::manual_seed(7);
  const at::Tensor loss = at::rand({4, 5}, at::kDouble);
  const at::Tensor mask = tensor(Matrix{{1, 1, 1, 0, 0}, {1, 0, 0, 0, 0}, {1, 1, 1, 1, 1}, {1, 1, 0, 0, 0}});
  for (const std::string& mode : rlcore::loss_agg_modes()) {
    INFO("mode " << mode);
    LossAggregation whole;
    whole.mode = mode;
    const double expected = scalar(rlcore::agg_loss(loss, mask, whole));

    // Two data-parallel ranks of two one-row micro-batches each: DP averages the
    // ranks' gradients, each rank accumulates its micro-batches.
    LossAggregation part = whole;
    part.dp_size = 2;
    part.batch_num_tokens = scalar(mask.sum());
    part.global_batch_size = 4;
    double total = 0;
    for (int rank = 0; rank < 2; ++rank) {
      double rank_sum = 0;
      for (int micro = 0; micro < 2; ++micro) {
        const int64_t row = rank * 2 + micro;
        rank_sum += scalar(rlcore::agg_loss(loss.slice(0, row, row + 1), mask.slice(0, row, row + 1), part));
      }
      total += rank_sum / 2;
    }
    CHECK(total == Approx(expected).epsilon(1e-12));
  }
}

TEST_CASE("agg_loss rejects unknown modes, missing global counts and bad shapes", "[algorithms]") {
  const at::Tensor loss = tensor(Matrix{{1, 2}});
  const at::Tensor mask = tensor(Matrix{{1, 1}});
  LossAggregation bad;
  bad.mode = "token-median";
  CHECK_THAT(error_of<rlcore::ValueError>([&] { rlcore::agg_loss(loss, mask, bad); }),
             Catch::Contains("token-median") && Catch::Contains("seq-mean-token-sum-norm"));
  LossAggregation dp;
  dp.dp_size = 2;
  CHECK_THAT(error_of<rlcore::ValueError>([&] { rlcore::agg_loss(loss, mask, dp); }),
             Catch::Contains("batch_num_tokens"));
  dp.mode = "seq-mean-token-mean";
  CHECK_THAT(error_of<rlcore::ValueError>([&] { rlcore::agg_loss(loss, mask, dp); }),
             Catch::Contains("global_batch_size"));
  CHECK_THAT(error_of<rlcore::ValueError>([&] {
               rlcore::agg_loss(loss, tensor(Matrix{{1, 1, 1}}), {});
             }),
             Catch::Contains("loss_mask") && Catch::Contains("[1, 3]"));
  // A fully masked micro-batch contributes 0 instead of 0/0.
  CHECK(scalar(rlcore::agg_loss(loss, at::zeros_like(mask), {})) == 0.0);
}

TEST_CASE("entropy_from_logits and its aggregation", "[algorithms]") {
  const at::Tensor logits = at::stack({tensor(Row{0, 0}), tensor(Row{std::log(1.0), std::log(3.0)})}).unsqueeze(0);
  const double h1 = std::log(2.0);
  const double h2 = -(0.25 * std::log(0.25) + 0.75 * std::log(0.75));
  const at::Tensor entropy = rlcore::entropy_from_logits(logits);  // [1, 2]
  check_close(entropy, Matrix{{h1, h2}}, 1e-12);
  CHECK(scalar(rlcore::aggregate_entropy(entropy, tensor(Matrix{{1, 0}}), {})) == Approx(h1));
}

TEST_CASE("kl_penalty estimators on known numbers", "[algorithms]") {
  const at::Tensor log_prob = tensor(Matrix{{-1, -2}});
  const at::Tensor ref = tensor(Matrix{{-1.5, -1}});
  for (const char* name : {"kl", "k1"}) check_close(rlcore::kl_penalty(log_prob, ref, name), Matrix{{0.5, -1}});
  check_close(rlcore::kl_penalty(log_prob, ref, "abs"), Matrix{{0.5, 1}});
  for (const char* name : {"mse", "k2"}) check_close(rlcore::kl_penalty(log_prob, ref, name), Matrix{{0.125, 0.5}});
  const Matrix k3 = {{std::exp(-0.5) + 0.5 - 1, std::exp(1.0) - 1 - 1}};
  for (const char* name : {"low_var_kl", "k3"}) check_close(rlcore::kl_penalty(log_prob, ref, name), k3, 1e-12);

  // k3 is clamped to [-10, 10] (after clamping the log-ratio to [-20, 20]).
  check_close(rlcore::kl_penalty(tensor(Matrix{{0, 0}}), tensor(Matrix{{15, -25}}), "k3"), Matrix{{10, 10}});

  CHECK_THAT(error_of<rlcore::ValueError>([&] { rlcore::kl_penalty(log_prob, ref, "full"); }),
             Catch::Contains("'full'") && Catch::Contains("low_var_kl"));
}

TEST_CASE("kl_penalty with '+' keeps the value and takes k2's gradient", "[algorithms]") {
  const at::Tensor log_prob = tensor(Matrix{{-1, -2}}).requires_grad_(true);
  const at::Tensor ref = tensor(Matrix{{-1.5, -1}});
  const at::Tensor kl = rlcore::kl_penalty(log_prob, ref, "k3+");
  check_close(kl, matrix(rlcore::kl_penalty(log_prob, ref, "k3")), 1e-12);
  kl.sum().backward();
  check_close(log_prob.grad(), Matrix{{0.5, -1}}, 1e-12);  // d/dx 0.5 (x - ref)^2 = x - ref
}

TEST_CASE("compute_value_loss clips predictions around the old values", "[algorithms]") {
  const at::Tensor vpreds = tensor(Matrix{{1.0, 2.0, 0.0}}).requires_grad_(true);
  const at::Tensor values = tensor(Matrix{{0.5, 2.1, 0.0}});
  const at::Tensor returns = tensor(Matrix{{1.5, 1.0, 3.0}});
  const at::Tensor mask = tensor(Matrix{{1, 1, 0}});
  // Token 0: clipped to 0.7, (0.7 - 1.5)^2 = 0.64 > (1 - 1.5)^2 = 0.25, so the clipped loss wins.
  // Token 1: within the range, loss (2 - 1)^2 = 1. Token 2 is masked.
  const rlcore::ValueLossResult result = rlcore::compute_value_loss(vpreds, returns, values, mask, 0.2, {});
  CHECK(scalar(result.loss) == Approx(0.5 * (0.64 + 1.0) / 2));
  CHECK(scalar(result.clipfrac) == Approx(0.5));
  result.loss.backward();
  // The clipped token has no gradient; the other gets 0.5 * 2 (v - r) / 2.
  check_close(vpreds.grad(), Matrix{{0, 0.5 * 2 * (2.0 - 1.0) / 2, 0}}, 1e-12);
}
