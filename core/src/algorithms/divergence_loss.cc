// Built-in policy losses that bound the update by something other than PPO's
// ratio clip: DPPO's divergence trust regions (dppo_tv, dppo_kl), SAPO's soft
// gate and DRO's quadratic log-ratio penalty (verl's core_algos.py).
#include <ATen/ATen.h>

#include "algorithms/internal.h"
#include "rlcore/error.h"
#include "rlcore/metric_names.h"
#include "rlcore/policy_loss.h"
#include "rlcore/rl_functional.h"

namespace rlcore::algorithms {
namespace {

// Which tokens lie inside DPPO's trust region, given the policy's and the old
// policy's probabilities of the sampled token.
using TrustRegion = at::Tensor (*)(const at::Tensor& prob, const at::Tensor& old_prob, const at::Tensor& old_log_prob,
                                   const at::Tensor& log_prob, const at::Tensor& positive,
                                   const PolicyLossConfig& config);

// Total variation of the sampled token's probability: p - p_old within
// [-clip_ratio_low, clip_ratio_high], the side checked by the advantage's sign.
at::Tensor total_variation_region(const at::Tensor& prob, const at::Tensor& old_prob, const at::Tensor&,
                                  const at::Tensor&, const at::Tensor& positive, const PolicyLossConfig& config) {
  const at::Tensor change = prob - old_prob;
  return at::where(positive, change.le(config.high()), change.ge(-config.low()));
}

// KL between the two Bernoulli distributions "the sampled token or not": within
// clip_ratio_high (positive advantages) or clip_ratio_low (negative), or moving
// the probability in the direction that lowers the loss anyway.
at::Tensor binary_kl_region(const at::Tensor& prob, const at::Tensor& old_prob, const at::Tensor& old_log_prob,
                            const at::Tensor& log_prob, const at::Tensor& positive, const PolicyLossConfig& config) {
  constexpr double kEpsilon = 1e-8;  // verl's guard inside the log
  const at::Tensor binary_kl = old_prob * (old_log_prob - log_prob) +
                               (1 - old_prob) * at::log((1.0 - old_prob + kEpsilon) / (1.0 - prob + kEpsilon));
  return at::where(positive, binary_kl.le(config.high()).logical_or(prob.le(old_prob)),
                   binary_kl.le(config.low()).logical_or(prob.ge(old_prob)));
}

// DPPO: -A * sg(min(rho, clip_ratio_c)) * log_prob on the tokens inside the
// trust region, 0 outside it. clip_ratio_low/high are divergence thresholds
// here, and clip_ratio_c truncates the importance ratio (no dual clip).
class DppoLoss final : public PolicyLoss {
 public:
  DppoLoss(const char* name, TrustRegion region) : name_(name), region_(region) {}

  PolicyLossOutput compute(const PolicyLossInput& input, const PolicyLossConfig& config) const override {
    const auto [advantages, log_ratio, ratio] = policy_ratio(input, config, name_, LogRatio::kClamped);
    const at::Tensor& log_prob = input.log_prob;
    const at::Tensor& old_log_prob = input.old_log_prob;
    const at::Tensor& mask = input.response_mask;
    const at::Tensor truncated = ratio.clamp_max(config.clip_ratio_c).detach();
    const at::Tensor inside =
        region_(at::exp(log_prob), at::exp(old_log_prob), old_log_prob, log_prob, advantages.gt(0), config)
            .detach()
            .to(log_prob.scalar_type());

    PolicyLossOutput output;
    output.loss = weighted_agg_loss(-advantages * truncated * log_prob * inside, input, config.aggregation);
    output.metrics[metric_names::kActorPgClipfrac] = masked_mean(1.0 - inside, mask).detach();
    output.metrics[metric_names::kActorPpoKl] = masked_mean(-log_ratio, mask).detach();
    output.metrics[metric_names::kActorPgClipfracLower] =
        masked_mean(ratio.gt(config.clip_ratio_c) * inside, mask).detach();
    return output;
  }

 private:
  const char* name_;
  TrustRegion region_;
};

// SAPO: a sigmoid gate instead of a hard clip, -A * sigmoid(tau (rho - 1)) * 4 / tau
// with tau = tau_pos for positive advantages and tau_neg otherwise; always
// aggregated seq-mean-token-mean, whatever loss_agg_mode says (as verl does).
class SapoLoss final : public PolicyLoss {
 public:
  PolicyLossOutput compute(const PolicyLossInput& input, const PolicyLossConfig& config) const override {
    const auto [advantages, log_ratio, ratio] = policy_ratio(input, config, "sapo", LogRatio::kClamped);
    const at::Tensor& log_prob = input.log_prob;
    const at::Tensor& mask = input.response_mask;
    const at::Tensor tau = at::where(advantages.gt(0), at::scalar_tensor(config.tau_pos, advantages.options()),
                                     at::scalar_tensor(config.tau_neg, advantages.options()));
    const at::Tensor gates = at::sigmoid(tau * (ratio - 1.0)) * (4.0 / tau);

    LossAggregation aggregation = config.aggregation;
    aggregation.mode = "seq-mean-token-mean";
    PolicyLossOutput output;
    output.loss = weighted_agg_loss(-gates * advantages, input, aggregation);
    output.metrics[metric_names::kActorPgClipfrac] = at::zeros({}, log_prob.options());
    output.metrics[metric_names::kActorPpoKl] = masked_mean(-log_ratio, mask).detach();
    output.metrics[metric_names::kActorPgClipfracLower] = at::zeros({}, log_prob.options());
    return output;
  }
};

struct DroOptions {
  double dro_beta = 0.0;
};

// DRO: -(log_prob * A - beta / 2 * log(pi/pi_old)^2), the log-ratio unclamped.
class DroLoss final : public PolicyLoss {
 public:
  explicit DroLoss(double beta) : beta_(beta) {
    if (!(beta_ > 0)) {
      throw ConfigError("policy loss 'dro' needs actor_rollout_ref.actor.policy_loss.dro_beta > 0 (it is " +
                        std::to_string(beta_) + ")");
    }
  }

  PolicyLossOutput compute(const PolicyLossInput& input, const PolicyLossConfig& config) const override {
    validate_policy_loss_input(input, config, "dro");
    const at::Tensor& log_prob = input.log_prob;
    const at::Tensor advantages = input.advantages.to(log_prob.scalar_type());
    const at::Tensor log_ratio = log_prob - input.old_log_prob;
    PolicyLossOutput output;
    output.loss =
        weighted_agg_loss(-(log_prob * advantages - 0.5 * beta_ * log_ratio.square()), input, config.aggregation);
    output.metrics[metric_names::kActorPpoKl] = masked_mean(-log_ratio, input.response_mask).detach();
    return output;
  }

 private:
  double beta_;
};

}  // namespace

void register_divergence_losses(PluginRegistrar& registrar) {
  registrar.add<PolicyLoss>(
      "dppo_tv", "DPPO-Binary-TV: policy gradient inside a total-variation trust region, truncated IS ratio",
      OptionsSchema<NoOptions>(),
      [](const NoOptions&) { return std::make_unique<DppoLoss>("dppo_tv", total_variation_region); });
  registrar.add<PolicyLoss>("dppo_kl",
                            "DPPO-Binary-KL: policy gradient inside a binary-KL trust region, truncated IS ratio",
                            OptionsSchema<NoOptions>(),
                            [](const NoOptions&) { return std::make_unique<DppoLoss>("dppo_kl", binary_kl_region); });
  registrar.add<PolicyLoss>("sapo", "SAPO: a sigmoid gate on the ratio (actor.tau_pos / tau_neg) instead of clipping",
                            OptionsSchema<NoOptions>(), [](const NoOptions&) { return std::make_unique<SapoLoss>(); });
  registrar.add<PolicyLoss>(
      "dro", "DRO: policy gradient with a quadratic log-ratio penalty",
      OptionsSchema<DroOptions>().key(
          "dro_beta", &DroOptions::dro_beta,
          "Weight of the quadratic log-ratio penalty; dro needs it > 0 (verl has no default).", at_least(0)),
      [](const DroOptions& options) { return std::make_unique<DroLoss>(options.dro_beta); });
}

}  // namespace rlcore::algorithms
