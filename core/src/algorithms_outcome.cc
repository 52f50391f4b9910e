// Built-in estimators for outcome rewards that compare each response with the
// other responses to its prompt (rows sharing an index): grpo, rloo, opo, gpg
// and reinforce_plus_plus_baseline (verl's core_algos.py).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>

#include "algorithms_internal.h"
#include "rlcore/advantage_estimator.h"
#include "rlcore/rl_functional.h"

namespace rlcore::algorithms {
namespace {

constexpr double kGrpoEpsilon = 1e-6;  // verl's epsilon in (score - mean) / (std + epsilon)

constexpr AdvantageNeeds kNeedsIndex{false, /*index=*/true, false};

struct GrpoOptions {
  bool norm_adv_by_std_in_grpo = true;
};

// A response's score: its rewards summed over the response.
at::Tensor outcome_scores(const AdvantageInput& input) { return input.token_level_rewards.sum(-1); }

// verl treats a prompt with a single response as its own baseline-free group:
// mean 0 (and std 1 where a std is used).
at::Tensor group_mean_or_zero(const GroupStats& stats) {
  return at::where(stats.count.eq(1), at::zeros_like(stats.mean), stats.mean);
}

// GRPO: (score - group mean) / (group std + 1e-6), or without the std
// (Dr. GRPO) when norm_adv_by_std_in_grpo is false.
class GrpoEstimator final : public AdvantageEstimator {
 public:
  explicit GrpoEstimator(GrpoOptions options) : options_(options) {}
  AdvantageNeeds needs() const override { return kNeedsIndex; }

  AdvantageOutput compute(const AdvantageInput& input) const override {
    validate_advantage_input(input, needs(), "grpo");
    at::NoGradGuard no_grad;
    const at::Tensor scores = outcome_scores(input);
    const GroupStats stats = group_stats(scores, input.index);
    const at::Tensor centered = scores - group_mean_or_zero(stats);
    if (!options_.norm_adv_by_std_in_grpo) return broadcast_outcome(centered, input.response_mask);
    const at::Tensor stddev = at::where(stats.count.eq(1), at::ones_like(stats.stddev), stats.stddev);
    return broadcast_outcome(centered / (stddev + kGrpoEpsilon), input.response_mask);
  }

 private:
  GrpoOptions options_;
};

// RLOO: score minus the mean of the other responses, n/(n-1) * (score - mean);
// a single response keeps its score.
class RlooEstimator final : public AdvantageEstimator {
 public:
  AdvantageNeeds needs() const override { return kNeedsIndex; }

  AdvantageOutput compute(const AdvantageInput& input) const override {
    validate_advantage_input(input, needs(), "rloo");
    at::NoGradGuard no_grad;
    const at::Tensor scores = outcome_scores(input);
    const GroupStats stats = group_stats(scores, input.index);
    const at::Tensor scale = stats.count / (stats.count - 1).clamp_min(1);
    const at::Tensor leave_one_out = scores * scale - stats.mean * scale;
    return broadcast_outcome(at::where(stats.count.gt(1), leave_one_out, scores), input.response_mask);
  }
};

// OPO: score minus the length-weighted group mean sum(len * score) / sum(len).
class OpoEstimator final : public AdvantageEstimator {
 public:
  AdvantageNeeds needs() const override { return kNeedsIndex; }

  AdvantageOutput compute(const AdvantageInput& input) const override {
    validate_advantage_input(input, needs(), "opo");
    at::NoGradGuard no_grad;
    const at::Tensor scores = outcome_scores(input);
    const at::Tensor lengths = float_mask(input.response_mask, scores).sum(-1);
    const GroupStats weighted = group_stats(lengths * scores, input.index);
    const GroupStats length_stats = group_stats(lengths, input.index);
    // A group of empty responses has no length to weight by; verl's 0/0 becomes 0.
    const at::Tensor has_tokens = length_stats.mean.gt(0);
    at::Tensor baseline = at::where(has_tokens, weighted.mean / length_stats.mean.clamp_min(1e-30),
                                    at::zeros_like(scores));
    baseline = at::where(length_stats.count.eq(1), at::zeros_like(baseline), baseline);
    return broadcast_outcome(scores - baseline, input.response_mask);
  }
};

// GPG: alpha * (score - group mean) with alpha = B / (rows with a nonzero
// score), at least 1 in the denominator; verl's f_norm is 1.
class GpgEstimator final : public AdvantageEstimator {
 public:
  AdvantageNeeds needs() const override { return kNeedsIndex; }

  AdvantageOutput compute(const AdvantageInput& input) const override {
    validate_advantage_input(input, needs(), "gpg");
    at::NoGradGuard no_grad;
    const at::Tensor scores = outcome_scores(input);
    const GroupStats stats = group_stats(scores, input.index);
    const double nonzero = static_cast<double>(scores.ne(0).sum().item<int64_t>());
    const double alpha = static_cast<double>(scores.size(0)) / std::max(nonzero, 1.0);
    return broadcast_outcome(alpha * (scores - group_mean_or_zero(stats)), input.response_mask);
  }
};

// REINFORCE++ with a baseline: score minus the group mean, broadcast over the
// response and whitened over the batch's response tokens.
class ReinforcePlusPlusBaselineEstimator final : public AdvantageEstimator {
 public:
  AdvantageNeeds needs() const override { return kNeedsIndex; }

  AdvantageOutput compute(const AdvantageInput& input) const override {
    validate_advantage_input(input, needs(), "reinforce_plus_plus_baseline");
    at::NoGradGuard no_grad;
    const at::Tensor scores = outcome_scores(input);
    const GroupStats stats = group_stats(scores, input.index);
    const at::Tensor mask = float_mask(input.response_mask, scores);
    const at::Tensor broadcast = (scores - group_mean_or_zero(stats)).unsqueeze(-1) * mask;
    at::Tensor advantages = masked_whiten(broadcast, mask) * mask;
    return {advantages, advantages.clone()};
  }
};

}  // namespace

void register_outcome_estimators(PluginRegistrar& registrar) {
  registrar.add<AdvantageEstimator>(
      "grpo", "GRPO: (score - group mean) / (group std + 1e-6) per prompt group",
      OptionsSchema<GrpoOptions>().key(
          "norm_adv_by_std_in_grpo", &GrpoOptions::norm_adv_by_std_in_grpo,
          "Divide by the group std (GRPO); false keeps score - mean only (Dr. GRPO)."),
      [](const GrpoOptions& options) { return std::make_unique<GrpoEstimator>(options); });
  registrar.add<AdvantageEstimator>("rloo", "RLOO: score minus the mean of the prompt's other responses",
                                    OptionsSchema<NoOptions>(),
                                    [](const NoOptions&) { return std::make_unique<RlooEstimator>(); });
  registrar.add<AdvantageEstimator>("opo", "OPO: score minus the length-weighted group mean",
                                    OptionsSchema<NoOptions>(),
                                    [](const NoOptions&) { return std::make_unique<OpoEstimator>(); });
  registrar.add<AdvantageEstimator>("gpg", "GPG: (score - group mean) scaled by batch size / nonzero scores",
                                    OptionsSchema<NoOptions>(),
                                    [](const NoOptions&) { return std::make_unique<GpgEstimator>(); });
  registrar.add<AdvantageEstimator>(
      "reinforce_plus_plus_baseline", "REINFORCE++ with the group mean as baseline, whitened over the batch",
      OptionsSchema<NoOptions>(),
      [](const NoOptions&) { return std::make_unique<ReinforcePlusPlusBaselineEstimator>(); });
}

}  // namespace rlcore::algorithms
