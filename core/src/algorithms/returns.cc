// Built-in estimators that discount rewards along the response: gae,
// reinforce_plus_plus and remax (verl's core_algos.py).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "algorithms/internal.h"
#include "rlcore/advantage_estimator.h"
#include "rlcore/rl_functional.h"

namespace rlcore::algorithms {
namespace {

struct GaeOptions {
  double gamma = 1.0;
  double lam = 1.0;
};

struct DiscountOptions {
  double gamma = 1.0;
};

// Generalized Advantage Estimation. Masked-out positions (padding, or tool
// observations inside a multi-turn response) are skipped: they neither add a
// TD error nor break the recursion, as in verl.
class GaeEstimator final : public AdvantageEstimator {
 public:
  explicit GaeEstimator(GaeOptions options) : options_(options) {}

  AdvantageNeeds needs() const override { return {/*values=*/true, false, false}; }

  AdvantageOutput compute(const AdvantageInput& input) const override {
    validate_advantage_input(input, needs(), "gae");
    at::NoGradGuard no_grad;
    const at::Tensor& rewards = input.token_level_rewards;
    const at::Tensor values = input.values.to(rewards.device(), rewards.scalar_type());
    const at::Tensor mask = float_mask(input.response_mask, rewards);
    const int64_t length = rewards.size(1);

    at::Tensor next_values = at::zeros({rewards.size(0)}, rewards.options());
    at::Tensor last_gae = at::zeros({rewards.size(0)}, rewards.options());
    at::Tensor advantages = at::zeros_like(rewards);
    for (int64_t t = length - 1; t >= 0; --t) {
      const at::Tensor m = mask.select(1, t);
      const at::Tensor v = values.select(1, t);
      const at::Tensor delta = rewards.select(1, t) + options_.gamma * next_values - v;
      const at::Tensor gae = delta + options_.gamma * options_.lam * last_gae;
      next_values = v * m + (1 - m) * next_values;
      last_gae = gae * m + (1 - m) * last_gae;
      advantages.select(1, t).copy_(last_gae);
    }
    at::Tensor returns = advantages + values;
    return {masked_whiten(advantages, mask), returns};
  }

 private:
  GaeOptions options_;
};

// REINFORCE++: discounted returns per token, whitened over the whole batch.
// Masked-out positions carry the running return through unchanged (verl's
// fix for multi-turn observation spans) and get a return of 0.
class ReinforcePlusPlusEstimator final : public AdvantageEstimator {
 public:
  explicit ReinforcePlusPlusEstimator(DiscountOptions options) : options_(options) {}

  AdvantageOutput compute(const AdvantageInput& input) const override {
    validate_advantage_input(input, needs(), "reinforce_plus_plus");
    at::NoGradGuard no_grad;
    const at::Tensor& rewards = input.token_level_rewards;
    const at::Tensor mask = float_mask(input.response_mask, rewards);
    at::Tensor returns = at::zeros_like(rewards);
    at::Tensor running = at::zeros({rewards.size(0)}, rewards.options());
    for (int64_t t = rewards.size(1) - 1; t >= 0; --t) {
      const at::Tensor m = mask.select(1, t);
      const at::Tensor updated = rewards.select(1, t) + options_.gamma * running;
      returns.select(1, t).copy_(updated * m);
      running = updated * m + running * (1 - m);
    }
    at::Tensor advantages = masked_whiten(returns, mask) * mask;
    return {advantages, returns};
  }

 private:
  DiscountOptions options_;
};

// ReMax: undiscounted reward-to-go minus the greedy response's reward.
class RemaxEstimator final : public AdvantageEstimator {
 public:
  AdvantageNeeds needs() const override { return {false, false, /*reward_baselines=*/true}; }

  AdvantageOutput compute(const AdvantageInput& input) const override {
    validate_advantage_input(input, needs(), "remax");
    at::NoGradGuard no_grad;
    const at::Tensor& rewards = input.token_level_rewards;
    const at::Tensor mask = float_mask(input.response_mask, rewards);
    const at::Tensor baselines = input.reward_baselines.to(rewards.device(), rewards.scalar_type());
    at::Tensor returns = (rewards * mask).flip({-1}).cumsum(-1).flip({-1});
    at::Tensor advantages = returns - baselines.unsqueeze(-1) * mask;
    return {advantages, returns};
  }
};

}  // namespace

void register_return_estimators(PluginRegistrar& registrar) {
  registrar.add<AdvantageEstimator>(
      "gae", "GAE over critic values (PPO), whitened over the batch",
      OptionsSchema<GaeOptions>()
          .key("gamma", &GaeOptions::gamma, "Discount factor.", in_range(0, 1))
          .key("lam", &GaeOptions::lam, "GAE lambda: bias/variance trade-off.", in_range(0, 1)),
      [](const GaeOptions& options) { return std::make_unique<GaeEstimator>(options); });
  registrar.add<AdvantageEstimator>(
      "reinforce_plus_plus", "REINFORCE++: discounted returns whitened over the batch",
      OptionsSchema<DiscountOptions>().key("gamma", &DiscountOptions::gamma, "Discount factor.", in_range(0, 1)),
      [](const DiscountOptions& options) { return std::make_unique<ReinforcePlusPlusEstimator>(options); });
  registrar.add<AdvantageEstimator>("remax", "ReMax: reward-to-go minus the greedy response's reward",
                                    OptionsSchema<NoOptions>(),
                                    [](const NoOptions&) { return std::make_unique<RemaxEstimator>(); });
}

}  // namespace rlcore::algorithms
