// Built-in ratio-clipping policy losses: vanilla (PPO with dual clip), gspo,
// cispo, gpg's plain policy gradient and geo_mean (GMPO) (verl's core_algos.py).
#include <ATen/ATen.h>

#include "algorithms/internal.h"
#include "rlcore/metric_names.h"
#include "rlcore/policy_loss.h"
#include "rlcore/rl_functional.h"

namespace rlcore::algorithms {
namespace {

constexpr double kSeqLogRatioClamp = 10.0;  // gspo's upper clamp on the sequence log-ratio

// PPO's clipped surrogate with asymmetric bounds, plus the dual clip: for a
// negative advantage the loss is capped at -A * clip_ratio_c.
class VanillaLoss final : public PolicyLoss {
 public:
  PolicyLossOutput compute(const PolicyLossInput& input, const PolicyLossConfig& config) const override {
    const auto [advantages, log_ratio, ratio] = policy_ratio(input, config, "vanilla", LogRatio::kClamped);
    const at::Tensor& log_prob = input.log_prob;
    const at::Tensor& mask = input.response_mask;

    const at::Tensor losses1 = -advantages * ratio;
    const at::Tensor losses2 = -advantages * ratio.clamp(1 - config.low(), 1 + config.high());
    const at::Tensor clipped1 = at::maximum(losses1, losses2);
    const at::Tensor losses3 = -advantages * config.clip_ratio_c;
    const at::Tensor clipped2 = at::minimum(losses3, clipped1);
    const at::Tensor negative = advantages.lt(0);
    const at::Tensor pg_losses = at::where(negative, clipped2, clipped1);

    PolicyLossOutput output;
    output.loss = weighted_agg_loss(pg_losses, input, config.aggregation);
    output.metrics[metric_names::kActorPgClipfrac] = masked_fraction(losses2.gt(losses1), mask, log_prob);
    output.metrics[metric_names::kActorPpoKl] = masked_mean(-log_ratio, mask).detach();
    output.metrics[metric_names::kActorPgClipfracLower] =
        masked_fraction(clipped1.gt(losses3).logical_and(negative), mask, log_prob);
    return output;
  }
};

// GSPO: one importance ratio per sequence, exp(mean over the response of
// log(pi/pi_old)), carrying each token's own gradient; aggregated with the
// configured loss_agg_mode, as verl >= 0.6 does (the paper's choice is
// seq-mean-token-mean).
class GspoLoss final : public PolicyLoss {
 public:
  PolicyLossOutput compute(const PolicyLossInput& input, const PolicyLossConfig& config) const override {
    validate_policy_loss_input(input, config, "gspo");
    const at::Tensor& log_prob = input.log_prob;
    const at::Tensor advantages = input.advantages.to(log_prob.scalar_type());
    const at::Tensor& mask = input.response_mask;
    const at::Tensor log_ratio = log_prob - input.old_log_prob;
    const at::Tensor lengths = float_mask(mask, log_prob).sum(-1).clamp_min(1);
    const at::Tensor seq_log_ratio = masked_sum(log_ratio, mask, -1) / lengths;
    const at::Tensor token_log_ratio =
        (log_prob - log_prob.detach() + seq_log_ratio.detach().unsqueeze(-1)).clamp_max(kSeqLogRatioClamp);
    const at::Tensor ratio = at::exp(token_log_ratio);

    const at::Tensor losses1 = -advantages * ratio;
    const at::Tensor losses2 = -advantages * ratio.clamp(1 - config.low(), 1 + config.high());

    PolicyLossOutput output;
    output.loss = weighted_agg_loss(at::maximum(losses1, losses2), input, config.aggregation);
    output.metrics[metric_names::kActorPgClipfrac] = masked_fraction(losses2.gt(losses1), mask, log_prob);
    output.metrics[metric_names::kActorPpoKl] = masked_mean(-log_ratio, mask).detach();
    output.metrics[metric_names::kActorPgClipfracLower] = at::zeros({}, log_prob.options());
    return output;
  }
};

// CISPO: -sg(clip(ratio)) * A * log_prob; the clipped ratio only weights the
// policy gradient, so clipped tokens still get a gradient.
class CispoLoss final : public PolicyLoss {
 public:
  PolicyLossOutput compute(const PolicyLossInput& input, const PolicyLossConfig& config) const override {
    const auto [advantages, log_ratio, ratio] = policy_ratio(input, config, "cispo", LogRatio::kClamped);
    const at::Tensor& log_prob = input.log_prob;
    const at::Tensor& mask = input.response_mask;
    const at::Tensor clipped = ratio.clamp(1 - config.low(), 1 + config.high());

    PolicyLossOutput output;
    output.loss = weighted_agg_loss(-clipped.detach() * advantages * log_prob, input, config.aggregation);
    output.metrics[metric_names::kActorPgClipfrac] = masked_fraction(ratio.ne(clipped), mask, log_prob);
    output.metrics[metric_names::kActorPpoKl] = masked_mean(-log_ratio, mask).detach();
    output.metrics[metric_names::kActorPgClipfracLower] = at::zeros({}, log_prob.options());
    return output;
  }
};

// GPG's policy gradient without ratio or clipping: -log_prob * A.
class GpgLoss final : public PolicyLoss {
 public:
  PolicyLossOutput compute(const PolicyLossInput& input, const PolicyLossConfig& config) const override {
    validate_policy_loss_input(input, config, "gpg");
    const at::Tensor advantages = input.advantages.to(input.log_prob.scalar_type());
    PolicyLossOutput output;
    output.loss = weighted_agg_loss(-input.log_prob * advantages, input, config.aggregation);
    return output;
  }
};

// GMPO (geo_mean): the geometric mean of the token ratios of each sequence,
// each log-ratio clipped to [-clip_ratio_low, clip_ratio_high] on the side its
// advantage's sign makes pessimistic, times the sequence's mean advantage;
// the mean over sequences (rows, as verl's torch.mean; the configured global
// sequence count applies). Rollout-correction weights enter as their
// per-sequence geometric mean.
class GeoMeanLoss final : public PolicyLoss {
 public:
  PolicyLossOutput compute(const PolicyLossInput& input, const PolicyLossConfig& config) const override {
    validate_policy_loss_input(input, config, "geo_mean");
    const at::Tensor& log_prob = input.log_prob;
    const at::Tensor advantages = input.advantages.to(log_prob.scalar_type());
    const at::Tensor mask = float_mask(input.response_mask, log_prob);
    const at::Tensor log_ratio = log_prob - input.old_log_prob;  // verl leaves this one unclamped
    const at::Tensor clamped = log_ratio.clamp(-config.low(), config.high());
    const at::Tensor sign = at::sign(advantages);
    const at::Tensor kept = sign * at::minimum(sign * log_ratio, sign * clamped);
    const at::Tensor lengths = mask.sum(-1) + kSequenceEpsilon;
    const at::Tensor ratio = at::exp((kept * mask).sum(-1) / lengths);
    at::Tensor pg_losses = -(advantages * mask).sum(-1) / lengths * ratio;
    if (input.rollout_is_weights.defined()) {
      const at::Tensor weights = input.rollout_is_weights.to(log_prob.device(), log_prob.scalar_type());
      pg_losses = pg_losses * at::exp((at::log(weights + 1e-10) * mask).sum(-1) / lengths);
    }
    LossAggregation aggregation = config.aggregation;
    aggregation.mode = "seq-mean-token-sum";

    const at::Tensor clipped = log_ratio.ne(clamped);
    PolicyLossOutput output;
    output.loss = agg_loss(pg_losses.unsqueeze(-1), at::ones({pg_losses.size(0), 1}, mask.options()), aggregation);
    output.metrics[metric_names::kActorPgClipfrac] =
        masked_fraction(clipped.logical_and(advantages.gt(0)), mask, log_prob);
    output.metrics[metric_names::kActorPpoKl] = masked_mean(-log_ratio, mask).detach();
    output.metrics[metric_names::kActorPgClipfracLower] =
        masked_fraction(clipped.logical_and(advantages.lt(0)), mask, log_prob);
    return output;
  }

 private:
  static constexpr double kSequenceEpsilon = 1e-8;  // verl's response_mask.sum(-1) + 1e-8
};

template <class Loss>
void add_without_options(PluginRegistrar& registrar, const char* name, const char* doc) {
  registrar.add<PolicyLoss>(name, doc, OptionsSchema<NoOptions>(),
                            [](const NoOptions&) { return std::make_unique<Loss>(); });
}

}  // namespace

void register_ppo_losses(PluginRegistrar& registrar) {
  add_without_options<VanillaLoss>(registrar, "vanilla",
                                   "PPO clipped surrogate with clip_ratio_low/high and the dual clip clip_ratio_c");
  add_without_options<GspoLoss>(registrar, "gspo", "GSPO: PPO clipping on a per-sequence importance ratio");
  add_without_options<CispoLoss>(registrar, "cispo", "CISPO: policy gradient weighted by the clipped, detached ratio");
  add_without_options<GpgLoss>(registrar, "gpg", "GPG: plain policy gradient -log_prob * advantage");
  add_without_options<GeoMeanLoss>(registrar, "geo_mean",
                                   "GMPO: clipped geometric mean of each sequence's token ratios times its advantage");
}

}  // namespace rlcore::algorithms
