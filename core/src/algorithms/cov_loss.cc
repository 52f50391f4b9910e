// Built-in covariance-guided policy losses from "The Entropy Mechanism of RL
// for Reasoning LMs" (arXiv 2505.22617): clip_cov and kl_cov, as in verl.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <limits>

#include "algorithms/internal.h"
#include "rlcore/metric_names.h"
#include "rlcore/policy_loss.h"
#include "rlcore/rl_functional.h"

namespace rlcore::algorithms {
namespace {

struct ClipCovOptions {
  double clip_cov_ratio = 0.0002;
  double clip_cov_lb = 1.0;
  double clip_cov_ub = 5.0;
};

struct KlCovOptions {
  double kl_cov_ratio = 0.0002;
  double ppo_kl_coef = 0.1;
};

// PPO clipping, plus: of the unclipped response tokens whose covariance
// (A - mean A) * (log_prob - mean log_prob) lies in (clip_cov_lb, clip_cov_ub),
// a random max(1, clip_cov_ratio * tokens) are cut from the gradient.
class ClipCovLoss final : public PolicyLoss {
 public:
  explicit ClipCovLoss(ClipCovOptions options) : options_(options) {}

  PolicyLossOutput compute(const PolicyLossInput& input, const PolicyLossConfig& config) const override {
    const auto [advantages, log_ratio, ratio] = policy_ratio(input, config, "clip_cov", LogRatio::kUnclamped);
    const at::Tensor& log_prob = input.log_prob;
    const at::Tensor mask = float_mask(input.response_mask, log_prob);
    const at::Tensor valid = mask.gt(0);
    const at::Tensor losses1 = -advantages * ratio;
    const at::Tensor losses2 = -advantages * ratio.clamp(1 - config.low(), 1 + config.high());
    const at::Tensor clipped_by_ppo = losses2.gt(losses1).logical_and(valid);

    at::Tensor corr = at::ones_like(advantages);
    {
      at::NoGradGuard no_grad;
      const at::Tensor detached = log_prob.detach();
      at::Tensor cov = (advantages - masked_mean(advantages, mask)) * (detached - masked_mean(detached, mask));
      const double minus_inf = -std::numeric_limits<double>::infinity();
      cov = cov.masked_fill(valid.logical_not(), minus_inf).masked_fill(clipped_by_ppo, minus_inf);
      const auto budget = static_cast<int64_t>(options_.clip_cov_ratio * mask.sum().item<double>());
      const int64_t clip_num = std::max<int64_t>(budget, 1);
      const at::Tensor in_band =
          cov.lt(options_.clip_cov_ub).logical_and(cov.gt(options_.clip_cov_lb)).logical_and(valid);
      const at::Tensor candidates = at::nonzero(in_band);  // [n, 2]
      const int64_t n = candidates.size(0);
      if (n > 0) {
        const at::Tensor pick =
            at::randperm(n, at::TensorOptions().dtype(at::kLong)).slice(0, 0, std::min(clip_num, n));
        const at::Tensor chosen = candidates.index_select(0, pick.to(candidates.device()));
        corr.index_put_({chosen.select(1, 0), chosen.select(1, 1)}, at::zeros({}, corr.options()));
      }
    }

    PolicyLossOutput output;
    output.loss = weighted_agg_loss(at::maximum(losses1, losses2) * corr, input, config.aggregation);
    output.metrics[metric_names::kActorPgClipfrac] = masked_mean(corr.eq(0).to(log_prob.scalar_type()), mask).detach();
    output.metrics[metric_names::kActorPpoKl] = masked_mean(-log_ratio, mask).detach();
    return output;
  }

 private:
  ClipCovOptions options_;
};

// Unclipped policy gradient; the top max(1, kl_cov_ratio * tokens) response
// tokens by covariance (A - mean A) * (log_prob - mean log_prob) also pay
// ppo_kl_coef * |log(pi / pi_old)|.
class KlCovLoss final : public PolicyLoss {
 public:
  explicit KlCovLoss(KlCovOptions options) : options_(options) {}

  PolicyLossOutput compute(const PolicyLossInput& input, const PolicyLossConfig& config) const override {
    const auto [advantages, log_ratio, ratio] = policy_ratio(input, config, "kl_cov", LogRatio::kUnclamped);
    const at::Tensor& log_prob = input.log_prob;
    const at::Tensor mask = float_mask(input.response_mask, log_prob);
    const at::Tensor abs_kl = log_ratio.abs();
    const at::Tensor losses = -advantages * ratio;
    const at::Tensor losses_kl = losses + options_.ppo_kl_coef * abs_kl;

    at::Tensor penalised = at::zeros({log_prob.numel()}, log_prob.options().dtype(at::kBool));
    {
      at::NoGradGuard no_grad;
      const at::Tensor valid_index = at::nonzero(mask.reshape({-1}).gt(0)).reshape({-1});
      const int64_t n = valid_index.size(0);
      if (n > 0) {
        const at::Tensor adv = advantages.reshape({-1}).index_select(0, valid_index);
        const at::Tensor logp = log_prob.detach().reshape({-1}).index_select(0, valid_index);
        const at::Tensor cov = (adv - adv.mean()) * (logp - logp.mean());
        const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(n) * options_.kl_cov_ratio));
        const at::Tensor top = std::get<1>(at::topk(cov, std::min(k, n), /*dim=*/0, /*largest=*/true));
        penalised.index_fill_(0, valid_index.index_select(0, top), true);
      }
    }

    PolicyLossOutput output;
    const at::Tensor pg_losses = at::where(penalised.reshape(log_prob.sizes()), losses_kl, losses);
    output.loss = weighted_agg_loss(pg_losses, input, config.aggregation);
    output.metrics[metric_names::kActorPpoKl] = masked_mean(abs_kl, mask).detach();
    return output;
  }

 private:
  KlCovOptions options_;
};

}  // namespace

void register_cov_losses(PluginRegistrar& registrar) {
  registrar.add<PolicyLoss>(
      "clip_cov", "Clip-Cov: PPO clipping plus cutting the gradient of high-covariance tokens",
      OptionsSchema<ClipCovOptions>()
          .key("clip_cov_ratio", &ClipCovOptions::clip_cov_ratio, "Fraction of response tokens cut from the gradient.",
               greater_than(0))
          .key("clip_cov_lb", &ClipCovOptions::clip_cov_lb, "Lower bound of the covariance band eligible for cutting.")
          .key("clip_cov_ub", &ClipCovOptions::clip_cov_ub, "Upper bound of the covariance band eligible for cutting."),
      [](const ClipCovOptions& options) { return std::make_unique<ClipCovLoss>(options); });
  registrar.add<PolicyLoss>("kl_cov",
                            "KL-Cov: policy gradient plus a |log-ratio| penalty on the highest-covariance tokens",
                            OptionsSchema<KlCovOptions>()
                                .key("kl_cov_ratio", &KlCovOptions::kl_cov_ratio,
                                     "Fraction of response tokens given the KL penalty.", greater_than(0))
                                .key("ppo_kl_coef", &KlCovOptions::ppo_kl_coef,
                                     "Coefficient of the |log(pi / pi_old)| penalty.", at_least(0)),
                            [](const KlCovOptions& options) { return std::make_unique<KlCovLoss>(options); });
}

}  // namespace rlcore::algorithms
