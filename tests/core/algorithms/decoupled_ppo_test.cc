// AReaL's decoupled PPO objective (docs/async.md), the correction the
// asynchronous modes train with, from rlcore's parts: the trainer's recomputed
// log-probs as the proximal policy (old_log_prob), verl's token-level rollout
// correction against the behaviour policy's (the rollout's) log-probs with
// IcePop bounds (a weight above the cap is zeroed, its token still counted),
// and the vanilla clipped loss. Held to AReaL's formula computed by hand on
// recorded tensors, loss and gradient:
//   r = exp(logp - prox), pg = max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high)),
//   w = exp(prox - behav) if it is <= cap else 0, loss = sum(pg w mask) / sum(mask).
#include "../../common/algorithms_testing.h"

#include <memory>

#include <ATen/ATen.h>

#include "rlcore/core/algorithms/builtin_algorithms.h"
#include "rlcore/policy_loss.h"
#include "rlcore/registry.h"
#include "rlcore/rollout_correction.h"

using namespace rlcore_test;

namespace decoupled_ppo_test {

// Two rows of five tokens, recorded from an asynchronous run's shapes: the
// behaviour policy sampled them two updates before the proximal policy.
struct Recorded {
  Matrix behav = {{-1.20, -0.35, -2.10, -0.90, -3.00}, {-0.50, -1.70, -0.05, -2.40, -1.10}};
  Matrix prox = {{-1.05, -0.40, -0.60, -1.10, -2.70}, {-0.55, -1.20, -0.10, -2.30, -1.90}};
  Matrix logp = {{-0.80, -0.45, -0.55, -1.60, -2.60}, {-0.50, -1.25, -0.30, -2.00, -1.95}};
  Matrix advantages = {{1.0, 1.0, 1.0, 1.0, 1.0}, {-0.7, -0.7, -0.7, -0.7, -0.7}};
  Matrix mask = {{1, 1, 1, 1, 0}, {1, 1, 1, 1, 1}};
};

constexpr double kEpsLow = 0.2;
constexpr double kEpsHigh = 0.28;
constexpr double kCap = 4.0;  // exp(-0.6 + 2.1) = 4.48 in row 0 is above it

at::Tensor areal_loss(const Recorded& r, const at::Tensor& logp) {
  const at::Tensor prox = tensor(r.prox);
  const at::Tensor advantages = tensor(r.advantages);
  const at::Tensor mask = tensor(r.mask);
  const at::Tensor ratio = at::exp(logp - prox);
  const at::Tensor pg = at::maximum(-advantages * ratio, -advantages * at::clamp(ratio, 1 - kEpsLow, 1 + kEpsHigh));
  at::Tensor weight = at::exp(prox - tensor(r.behav));
  weight = at::where(weight <= kCap, weight, at::zeros_like(weight));
  return (pg * weight * mask).sum() / mask.sum();
}

}  // namespace decoupled_ppo_test

using namespace decoupled_ppo_test;

TEST_CASE("AReaL's decoupled PPO objective is the vanilla loss with token IcePop weights against the rollout",
          "[algorithms][async]") {
  const Recorded recorded;
  rlcore::RolloutCorrectionConfig correction;
  correction.rollout_is = "token";
  correction.rollout_is_threshold = "1e-12_4.0";  // IcePop: zero outside [lower, cap]
  const rlcore::RolloutCorrectionResult corrected = rlcore::compute_rollout_correction(
      tensor(recorded.prox), tensor(recorded.behav), tensor(recorded.mask), correction);
  CHECK(matrix(corrected.response_mask) == recorded.mask);   // no token leaves the denominator
  CHECK(scalar(corrected.rollout_is_weights[0][2]) == 0.0);  // exp(1.5) > the cap

  rlcore::Registry registry;
  rlcore::algorithms::register_builtin_algorithms(registry);
  const auto vanilla = registry.create<rlcore::PolicyLoss>("vanilla", rlcore::ConfigNode());
  rlcore::PolicyLossInput input;
  input.old_log_prob = tensor(recorded.prox);
  input.log_prob = tensor(recorded.logp).requires_grad_(true);
  input.advantages = tensor(recorded.advantages);
  input.response_mask = tensor(recorded.mask);
  input.rollout_is_weights = corrected.rollout_is_weights;
  rlcore::PolicyLossConfig config;
  config.clip_ratio_low = kEpsLow;
  config.clip_ratio_high = kEpsHigh;
  config.clip_ratio_c = 1e9;  // AReaL's objective here has no dual clip
  config.aggregation.mode = "token-mean";
  const rlcore::PolicyLossOutput ours = vanilla->compute(input, config);
  ours.loss.backward();

  const at::Tensor logp = tensor(recorded.logp).requires_grad_(true);
  const at::Tensor expected = areal_loss(recorded, logp);
  expected.backward();
  CHECK(scalar(ours.loss) == Approx(scalar(expected)).epsilon(1e-12));
  check_close(input.log_prob.grad(), matrix(logp.grad()), 1e-12);
  // The weights matter: without them the loss differs.
  rlcore::PolicyLossInput uncorrected = input;
  uncorrected.rollout_is_weights = at::Tensor();
  uncorrected.log_prob = tensor(recorded.logp).requires_grad_(true);
  CHECK(std::abs(scalar(vanilla->compute(uncorrected, config).loss) - scalar(expected)) > 1e-3);
}
