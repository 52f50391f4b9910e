// The built-in policy losses on hand-worked tokens: each clipping branch, the
// dual clip, clip-fraction counting, aggregation, and the gradient w.r.t.
// log_prob against its analytic value.
#include "../../common/algorithms_testing.h"

#include <cmath>
#include <memory>

#include "rlcore/config_node.h"
#include "rlcore/core/algorithms/builtin_algorithms.h"
#include "rlcore/error.h"
#include "rlcore/policy_loss.h"
#include "rlcore/registry.h"

using namespace rlcore_test;

namespace {

std::shared_ptr<rlcore::PolicyLoss> make_loss(const std::string& name, const std::string& yaml = "") {
  static const rlcore::Registry registry = [] {
    rlcore::Registry r;
    rlcore::algorithms::register_builtin_algorithms(r);
    return r;
  }();
  const rlcore::ConfigNode options = yaml.empty() ? rlcore::ConfigNode() : rlcore::ConfigNode::parse(yaml, "test");
  return registry.create<rlcore::PolicyLoss>(name, options);
}

double metric(const rlcore::PolicyLossOutput& out, const std::string& name) {
  INFO("metric " << name);
  REQUIRE(out.metrics.count(name) == 1);
  CHECK_FALSE(out.metrics.at(name).requires_grad());
  return scalar(out.metrics.at(name));
}

// One row of six tokens, the last masked out, each valid token in a different
// branch of PPO's clipped objective (clip_ratio_low 0.2, high 0.28, c 3):
//   0: A = 1,    log-ratio  0.5: ratio 1.65 > 1.28, clipped, loss -1.28, no gradient
//   1: A = 2,    log-ratio  0.1: inside the range, loss -2 e^0.1
//   2: A = -1,   log-ratio -0.5: ratio 0.61 < 0.8, clipped, loss 0.8, no gradient
//   3: A = -0.5, log-ratio  1.5: ratio 4.48 > c, dual clip, loss 0.5 * 3, no gradient
//   4: A = -1,   log-ratio  0.2: inside the range, loss e^0.2
//   5: masked: A = 100, log-ratio 3
struct PpoTokens {
  Row log_ratio = {0.5, 0.1, -0.5, 1.5, 0.2, 3.0};
  Row advantages = {1, 2, -1, -0.5, -1, 100};
  Row mask = {1, 1, 1, 1, 1, 0};
  Row old_log_prob = {-1.0, -2.0, -0.7, -3.0, -1.2, -2.5};

  rlcore::PolicyLossInput input() const {
    Row log_prob(old_log_prob.size());
    for (size_t i = 0; i < log_prob.size(); ++i) log_prob[i] = old_log_prob[i] + log_ratio[i];
    rlcore::PolicyLossInput in;
    in.old_log_prob = tensor(Matrix{old_log_prob});
    in.log_prob = tensor(Matrix{log_prob}).requires_grad_(true);
    in.advantages = tensor(Matrix{advantages});
    in.response_mask = tensor(Matrix{mask});
    return in;
  }
};

rlcore::PolicyLossConfig ppo_config() {
  rlcore::PolicyLossConfig config;
  config.clip_ratio = 0.2;
  config.clip_ratio_high = 0.28;
  config.clip_ratio_c = 3.0;
  return config;
}

}  // namespace

TEST_CASE("vanilla: every clipping branch, the dual clip and the clip fractions", "[algorithms]") {
  const PpoTokens tokens;
  const auto input = tokens.input();
  const auto out = make_loss("vanilla")->compute(input, ppo_config());
  const double losses[] = {-1.28, -2 * std::exp(0.1), 0.8, 0.5 * 3.0, std::exp(0.2)};
  const double expected = (losses[0] + losses[1] + losses[2] + losses[3] + losses[4]) / 5;
  CHECK(scalar(out.loss) == Approx(expected).epsilon(1e-12));
  CHECK(metric(out, "actor/pg_clipfrac") == Approx(2.0 / 5));        // tokens 0 and 2
  CHECK(metric(out, "actor/pg_clipfrac_lower") == Approx(1.0 / 5));  // token 3
  CHECK(metric(out, "actor/ppo_kl") == Approx(-(0.5 + 0.1 - 0.5 + 1.5 + 0.2) / 5));

  // d loss / d log_prob = d(-A * ratio)/d log_prob / N = -A * ratio / N where unclipped.
  out.loss.backward();
  check_close(input.log_prob.grad(), Matrix{{0, -2 * std::exp(0.1) / 5, 0, 0, std::exp(0.2) / 5, 0}}, 1e-12);
}

TEST_CASE("vanilla: symmetric clip_ratio when low/high are unset, and the aggregation mode", "[algorithms]") {
  const PpoTokens tokens;
  rlcore::PolicyLossConfig config;
  config.clip_ratio = 0.2;
  config.aggregation.mode = "seq-mean-token-sum";
  const auto out = make_loss("vanilla")->compute(tokens.input(), config);
  // Token 0 is now clipped at 1.2; the single sequence sums its five tokens.
  CHECK(scalar(out.loss) == Approx(-1.2 - 2 * std::exp(0.1) + 0.8 + 1.5 + std::exp(0.2)).epsilon(1e-12));

  config.clip_ratio_c = 1.0;
  CHECK_THAT(error_of<rlcore::ValueError>([&] { make_loss("vanilla")->compute(tokens.input(), config); }),
             Catch::Contains("clip_ratio_c") && Catch::Contains("'vanilla'"));
}

TEST_CASE("vanilla: rollout correction weights scale each token's loss", "[algorithms]") {
  const PpoTokens tokens;
  auto input = tokens.input();
  input.rollout_is_weights = tensor(Matrix{{2, 1, 1, 1, 0, 1}});
  const auto out = make_loss("vanilla")->compute(input, ppo_config());
  CHECK(scalar(out.loss) == Approx((2 * -1.28 - 2 * std::exp(0.1) + 0.8 + 1.5) / 5).epsilon(1e-12));
}

TEST_CASE("gspo: one clipped ratio per sequence, in the configured aggregation", "[algorithms]") {
  rlcore::PolicyLossInput input;
  input.old_log_prob = tensor(Matrix{{-1, -1, -1}, {-2, -2, -2}});
  input.log_prob = tensor(Matrix{{-0.8, -1.0, -0.6}, {-2.1, -2.2, -9.0}}).requires_grad_(true);
  input.advantages = tensor(Matrix{{1, 1, 1}, {-2, -2, -2}});
  input.response_mask = tensor(Matrix{{1, 1, 1}, {1, 1, 0}});
  rlcore::PolicyLossConfig config;
  config.clip_ratio = 0.2;
  config.aggregation.mode = "seq-mean-token-mean";  // the paper's; verl >= 0.6 takes loss_agg_mode as given
  const auto out = make_loss("gspo")->compute(input, config);
  // Row 0: s = exp(0.6 / 3) = 1.2214 > 1.2, clipped: loss -1.2 per token, no gradient.
  // Row 1: s = exp(-0.3 / 2) = 0.8607, inside: loss 2 * 0.8607 per token.
  // Token means divide by (n + 1e-8), as verl's agg_loss.
  const double s1 = std::exp(-0.15);
  CHECK(scalar(out.loss) == Approx((-1.2 * 3 / (3 + 1e-8) + 2 * s1 * 2 / (2 + 1e-8)) / 2).epsilon(1e-12));
  CHECK(metric(out, "actor/pg_clipfrac") == Approx(3.0 / 5));
  CHECK(metric(out, "actor/pg_clipfrac_lower") == 0.0);
  CHECK(metric(out, "actor/ppo_kl") == Approx(-(0.2 + 0.0 + 0.4 - 0.1 - 0.2) / 5));
  out.loss.backward();
  // Each token of row 1 carries its own gradient -A * s / (2 tokens) / (2 sequences).
  const double g = 2 * s1 / (2 + 1e-8) / 2;
  check_close(input.log_prob.grad(), Matrix{{0, 0, 0}, {g, g, 0}}, 1e-12);
}

TEST_CASE("cispo: detached clipped ratio times the policy gradient", "[algorithms]") {
  const PpoTokens tokens;
  const auto input = tokens.input();
  const auto out = make_loss("cispo")->compute(input, ppo_config());
  const Row lp = matrix(input.log_prob)[0];
  const double ratio[] = {1.28, std::exp(0.1), 0.8, 1.28, std::exp(0.2)};
  double expected = 0;
  for (int i = 0; i < 5; ++i) expected += -ratio[i] * tokens.advantages[i] * lp[i];
  CHECK(scalar(out.loss) == Approx(expected / 5).epsilon(1e-12));
  CHECK(metric(out, "actor/pg_clipfrac") == Approx(3.0 / 5));  // tokens 0, 2, 3
  out.loss.backward();
  // Clipped tokens still have a gradient: -clip(ratio) * A / N.
  Matrix grad = {{0, 0, 0, 0, 0, 0}};
  for (int i = 0; i < 5; ++i) grad[0][i] = -ratio[i] * tokens.advantages[i] / 5;
  check_close(input.log_prob.grad(), grad, 1e-12);
}

TEST_CASE("gpg loss: -log_prob * advantage", "[algorithms]") {
  const PpoTokens tokens;
  const auto input = tokens.input();
  const auto out = make_loss("gpg")->compute(input, ppo_config());
  const Row lp = matrix(input.log_prob)[0];
  double expected = 0;
  for (int i = 0; i < 5; ++i) expected += -lp[i] * tokens.advantages[i];
  CHECK(scalar(out.loss) == Approx(expected / 5).epsilon(1e-12));
  CHECK(out.metrics.empty());
}

TEST_CASE("clip_cov cuts in-band, unclipped tokens from the gradient", "[algorithms]") {
  // log_prob = old_log_prob: ratio 1, so nothing is clipped by PPO.
  rlcore::PolicyLossInput input;
  input.log_prob = tensor(Matrix{{-1, -3, -1, -5}, {-3, -1, -2, -4}}).requires_grad_(true);
  input.old_log_prob = input.log_prob.detach().clone();
  input.advantages = tensor(Matrix{{2, -2, -2, 0}, {2, 2, 1, 9}});
  input.response_mask = tensor(Matrix{{1, 1, 1, 1}, {1, 1, 1, 0}});
  // Reference covariance over the 7 response tokens.
  const Matrix lp = matrix(input.log_prob), adv = matrix(input.advantages), mask = matrix(input.response_mask);
  double adv_mean = 0, lp_mean = 0, n = 0;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      if (mask[i][j] != 0) {
        adv_mean += adv[i][j];
        lp_mean += lp[i][j];
        n += 1;
      }
    }
  }
  adv_mean /= n;
  lp_mean /= n;
  int in_band = 0;
  Matrix corr = {{1, 1, 1, 1}, {1, 1, 1, 1}};
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      const double cov = (adv[i][j] - adv_mean) * (lp[i][j] - lp_mean);
      if (mask[i][j] != 0 && cov > 1.0 && cov < 5.0) {
        corr[i][j] = 0;
        ++in_band;
      }
    }
  }
  REQUIRE(in_band >= 2);  // the case exercises a real selection

  // A ratio large enough to cut every candidate makes the result deterministic.
  const auto out = make_loss("clip_cov", "clip_cov_ratio: 1.0")->compute(input, rlcore::PolicyLossConfig{});
  double expected = 0;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) expected += mask[i][j] * corr[i][j] * -adv[i][j];
  }
  CHECK(scalar(out.loss) == Approx(expected / n).epsilon(1e-12));
  CHECK(metric(out, "actor/pg_clipfrac") == Approx(in_band / n));
  out.loss.backward();
  Matrix grad = corr;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) grad[i][j] = mask[i][j] * corr[i][j] * -adv[i][j] / n;
  }
  check_close(input.log_prob.grad(), grad, 1e-12);

  // The default ratio cuts max(1, 0.0002 * 7) = 1 token.
  const auto one = make_loss("clip_cov")->compute(input, rlcore::PolicyLossConfig{});
  CHECK(metric(one, "actor/pg_clipfrac") == Approx(1.0 / n));
}

TEST_CASE("kl_cov adds ppo_kl_coef * |log-ratio| on the highest-covariance token", "[algorithms]") {
  rlcore::PolicyLossInput input;
  input.old_log_prob = tensor(Matrix{{-1, -2, -1.5}, {-1, -1, -1}});
  input.log_prob = tensor(Matrix{{-0.5, -2.5, -1.0}, {-1.2, -0.8, -7.0}}).requires_grad_(true);
  input.advantages = tensor(Matrix{{3, -1, 0.5}, {-2, 1, 50}});
  input.response_mask = tensor(Matrix{{1, 1, 1}, {1, 1, 0}});
  const Matrix lp = matrix(input.log_prob), old = matrix(input.old_log_prob), adv = matrix(input.advantages);
  const std::vector<std::pair<int, int>> valid = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}};
  double adv_mean = 0, lp_mean = 0;
  for (auto [i, j] : valid) {
    adv_mean += adv[i][j] / 5;
    lp_mean += lp[i][j] / 5;
  }
  std::pair<int, int> top = valid[0];
  double best = -1e300;
  for (auto [i, j] : valid) {
    const double cov = (adv[i][j] - adv_mean) * (lp[i][j] - lp_mean);
    if (cov > best) {
      best = cov;
      top = {i, j};
    }
  }
  double expected = 0, abs_kl = 0;
  for (auto [i, j] : valid) {
    const double log_ratio = lp[i][j] - old[i][j];
    double loss = -adv[i][j] * std::exp(log_ratio);
    if (std::make_pair(i, j) == top) loss += 0.5 * std::abs(log_ratio);
    expected += loss / 5;
    abs_kl += std::abs(log_ratio) / 5;
  }
  const auto out = make_loss("kl_cov", "ppo_kl_coef: 0.5")->compute(input, rlcore::PolicyLossConfig{});
  CHECK(scalar(out.loss) == Approx(expected).epsilon(1e-12));
  CHECK(metric(out, "actor/ppo_kl") == Approx(abs_kl));
}

TEST_CASE("policy losses name the tensor at fault", "[algorithms]") {
  const PpoTokens tokens;
  auto input = tokens.input();
  input.advantages = input.advantages.slice(1, 0, 3);
  CHECK_THAT(error_of<rlcore::ValueError>([&] { make_loss("gspo")->compute(input, ppo_config()); }),
             Catch::Contains("'gspo'") && Catch::Contains("'advantages'") && Catch::Contains("[1, 3]"));
  input = tokens.input();
  input.response_mask = at::Tensor();
  CHECK_THAT(error_of<rlcore::ValueError>([&] { make_loss("vanilla")->compute(input, ppo_config()); }),
             Catch::Contains("'response_mask'"));
}
