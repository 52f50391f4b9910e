// Built-in estimators for outcome rewards that compare each response with the
// other responses to its prompt (rows sharing an index): grpo (and its
// vectorized and pass@k forms), gdpo, rloo (and rloo_vectorized), opo, gpg
// and reinforce_plus_plus_baseline (verl's core_algos.py).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/internal.h"
#include "rlcore/advantage_estimator.h"
#include "rlcore/error.h"
#include "rlcore/rl_functional.h"

namespace rlcore::algorithms {
namespace {

constexpr double kGrpoEpsilon = 1e-6;  // verl's epsilon in (score - mean) / (std + epsilon)

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

// GRPO's per-row advantage: (score - group mean) / (group std + 1e-6), or
// without the std (Dr. GRPO) when `by_std` is false.
at::Tensor grpo_normalized(const at::Tensor& scores, const at::Tensor& index, bool by_std) {
  const GroupStats stats = group_stats(scores, index);
  const at::Tensor centered = scores - group_mean_or_zero(stats);
  if (!by_std) return centered;
  const at::Tensor stddev = at::where(stats.count.eq(1), at::ones_like(stats.stddev), stats.stddev);
  return centered / (stddev + kGrpoEpsilon);
}

class GrpoEstimator final : public AdvantageEstimator {
 public:
  explicit GrpoEstimator(GrpoOptions options) : options_(options) {}
  AdvantageNeeds needs() const override { return kNeedsIndex; }

  AdvantageOutput compute(const AdvantageInput& input) const override {
    validate_advantage_input(input, needs(), "grpo");
    at::NoGradGuard no_grad;
    return broadcast_outcome(grpo_normalized(outcome_scores(input), input.index, options_.norm_adv_by_std_in_grpo),
                             input.response_mask);
  }

 private:
  GrpoOptions options_;
};

struct GdpoOptions {
  std::vector<std::string> gdpo_reward_keys;
  std::vector<double> gdpo_reward_weights;  // empty: 1 each
  bool norm_adv_by_std_in_grpo = true;
};

// GDPO: each reward component (a grader extra named in gdpo_reward_keys) is
// GRPO-normalized within its group on its own, so a dominant component cannot
// drown the others; the weighted sum is then whitened over the batch's tokens.
class GdpoEstimator final : public AdvantageEstimator {
 public:
  explicit GdpoEstimator(GdpoOptions options) : options_(std::move(options)) {
    if (options_.gdpo_reward_keys.empty()) {
      throw ConfigError(
          "advantage estimator 'gdpo' needs algorithm.gdpo_reward_keys: the reward components (grader extras such as "
          "acc) to normalize one by one");
    }
    if (!options_.gdpo_reward_weights.empty() &&
        options_.gdpo_reward_weights.size() != options_.gdpo_reward_keys.size()) {
      throw ConfigError("algorithm.gdpo_reward_weights has " + std::to_string(options_.gdpo_reward_weights.size()) +
                        " weights for " + std::to_string(options_.gdpo_reward_keys.size()) +
                        " algorithm.gdpo_reward_keys");
    }
  }
  AdvantageNeeds needs() const override { return kNeedsIndex; }

  AdvantageOutput compute(const AdvantageInput& input) const override {
    validate_advantage_input(input, needs(), "gdpo");
    at::NoGradGuard no_grad;
    const at::Tensor mask = float_mask(input.response_mask, input.token_level_rewards);
    at::Tensor combined = at::zeros({mask.size(0)}, mask.options());
    for (size_t k = 0; k < options_.gdpo_reward_keys.size(); ++k) {
      const at::Tensor scores = component(input, options_.gdpo_reward_keys[k]).to(mask.options());
      const double weight = options_.gdpo_reward_weights.empty() ? 1.0 : options_.gdpo_reward_weights[k];
      combined = combined + weight * grpo_normalized(scores, input.index, options_.norm_adv_by_std_in_grpo);
    }
    const at::Tensor advantages = masked_whiten(combined.unsqueeze(-1) * mask, mask) * mask;
    return {advantages, advantages.clone()};
  }

 private:
  static const at::Tensor& component(const AdvantageInput& input, const std::string& key) {
    const auto it = input.reward_components.find(key);
    if (it == input.reward_components.end()) {
      std::string known;
      for (const auto& entry : input.reward_components) known += (known.empty() ? "" : ", ") + entry.first;
      throw ValueError("gdpo: reward component '" + key + "' (algorithm.gdpo_reward_keys) is not among the graders' " +
                       "extras (" + (known.empty() ? "they reported none" : "they reported: " + known) + ")");
    }
    if (it->second.dim() != 1 || it->second.size(0) != input.response_mask.size(0)) {
      throw ValueError("gdpo: reward component '" + key + "' must hold one value per response");
    }
    if (!at::isfinite(it->second).all().item<bool>()) {
      throw ValueError("gdpo: reward component '" + key + "' is missing (NaN) for some responses: every grader must " +
                       "report it");
    }
    return it->second;
  }

  GdpoOptions options_;
};

// RLOO: score minus the mean of the other responses, n/(n-1) * (score - mean).
// verl's two versions differ for a single response: `rloo` keeps its score,
// `rloo_vectorized` gives it 0.
class RlooEstimator final : public AdvantageEstimator {
 public:
  explicit RlooEstimator(bool vectorized) : vectorized_(vectorized) {}
  AdvantageNeeds needs() const override { return kNeedsIndex; }

  AdvantageOutput compute(const AdvantageInput& input) const override {
    validate_advantage_input(input, needs(), vectorized_ ? "rloo_vectorized" : "rloo");
    at::NoGradGuard no_grad;
    const at::Tensor scores = outcome_scores(input);
    const GroupStats stats = group_stats(scores, input.index);
    const at::Tensor scale = stats.count / (stats.count - 1).clamp_min(1);
    const at::Tensor leave_one_out = scores * scale - stats.mean * scale;
    const at::Tensor single = vectorized_ ? at::zeros_like(scores) : scores;
    return broadcast_outcome(at::where(stats.count.gt(1), leave_one_out, single), input.response_mask);
  }

 private:
  bool vectorized_;
};

// Pass@k (arXiv 2503.19595): only each group's best response gets an advantage,
// best minus second best, over (group std + 1e-6) unless norm_adv_by_std_in_grpo
// is false. Ties for the best give 0 to every row. Needs two responses per prompt.
class GrpoPassKEstimator final : public AdvantageEstimator {
 public:
  explicit GrpoPassKEstimator(GrpoOptions options) : options_(options) {}
  AdvantageNeeds needs() const override { return kNeedsIndex; }

  AdvantageOutput compute(const AdvantageInput& input) const override {
    validate_advantage_input(input, needs(), "grpo_passk");
    at::NoGradGuard no_grad;
    const at::Tensor scores = outcome_scores(input);
    const GroupStats stats = group_stats(scores, input.index);
    // On the host through accessors: indexing tensors per comparison would
    // dispatch an op each time.
    const at::Tensor score_tensor = scores.to(at::kCPU, at::kDouble).contiguous();
    const at::Tensor stddev_tensor = stats.stddev.to(at::kCPU, at::kDouble).contiguous();
    const at::Tensor index_tensor = input.index.to(at::kCPU, at::kLong).contiguous();
    const auto score = score_tensor.accessor<double, 1>();
    const auto stddev = stddev_tensor.accessor<double, 1>();
    const auto index = index_tensor.accessor<int64_t, 1>();
    std::map<int64_t, std::vector<int64_t>> groups;
    for (int64_t row = 0; row < index.size(0); ++row) groups[index[row]].push_back(row);
    at::Tensor advantage = at::zeros_like(score_tensor);
    auto advantage_of = advantage.accessor<double, 1>();
    for (auto& [id, rows] : groups) {
      if (rows.size() < 2) {
        throw ValueError(
            "grpo_passk needs at least 2 responses per prompt (actor_rollout_ref.rollout.n >= 2); "
            "group " +
            std::to_string(id) + " has 1");
      }
      std::stable_sort(rows.begin(), rows.end(), [&](int64_t a, int64_t b) { return score[a] > score[b]; });
      double value = score[rows[0]] - score[rows[1]];
      if (options_.norm_adv_by_std_in_grpo) value /= stddev[rows[0]] + kGrpoEpsilon;
      advantage_of[rows[0]] = value;
    }
    return broadcast_outcome(advantage.to(scores.options()), input.response_mask);
  }

 private:
  GrpoOptions options_;
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
    at::Tensor baseline =
        at::where(has_tokens, weighted.mean / length_stats.mean.clamp_min(1e-30), at::zeros_like(scores));
    baseline = at::where(length_stats.count.eq(1), at::zeros_like(baseline), baseline);
    return broadcast_outcome(scores - baseline, input.response_mask);
  }
};

struct GpgOptions {
  double f_norm = 1.0;
};

// GPG: alpha * (score - group mean) / f_norm with alpha = B / (rows with a
// nonzero score), at least 1 in the denominator.
class GpgEstimator final : public AdvantageEstimator {
 public:
  explicit GpgEstimator(GpgOptions options) : options_(options) {}
  AdvantageNeeds needs() const override { return kNeedsIndex; }

  AdvantageOutput compute(const AdvantageInput& input) const override {
    validate_advantage_input(input, needs(), "gpg");
    at::NoGradGuard no_grad;
    const at::Tensor scores = outcome_scores(input);
    const GroupStats stats = group_stats(scores, input.index);
    const double nonzero = static_cast<double>(scores.ne(0).sum().item<int64_t>());
    const double alpha = static_cast<double>(scores.size(0)) / std::max(nonzero, 1.0);
    return broadcast_outcome(alpha * (scores - group_mean_or_zero(stats)) / options_.f_norm, input.response_mask);
  }

 private:
  GpgOptions options_;
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
  const auto grpo_options = [] {
    return OptionsSchema<GrpoOptions>().key(
        "norm_adv_by_std_in_grpo", &GrpoOptions::norm_adv_by_std_in_grpo,
        "Divide by the group std (GRPO); false keeps score - mean only (Dr. GRPO).");
  };
  registrar.add<AdvantageEstimator>(
      "grpo", "GRPO: (score - group mean) / (group std + 1e-6) per prompt group", grpo_options(),
      [](const GrpoOptions& options) { return std::make_unique<GrpoEstimator>(options); });
  registrar.add<AdvantageEstimator>(
      "grpo_vectorized", "GRPO computed group-wise in one pass (verl's vectorized form; the same values)",
      grpo_options(), [](const GrpoOptions& options) { return std::make_unique<GrpoEstimator>(options); });
  registrar.add<AdvantageEstimator>(
      "grpo_passk", "Pass@k: each group's best response gets (best - second best) / (group std + 1e-6)", grpo_options(),
      [](const GrpoOptions& options) { return std::make_unique<GrpoPassKEstimator>(options); });
  registrar.add<AdvantageEstimator>(
      "gdpo", "GDPO: each reward component GRPO-normalized apart, weighted, summed, then whitened",
      OptionsSchema<GdpoOptions>()
          .key("gdpo_reward_keys", &GdpoOptions::gdpo_reward_keys,
               "The reward components (grader extras, e.g. [format, acc]) gdpo normalizes one by one.")
          .key("gdpo_reward_weights", &GdpoOptions::gdpo_reward_weights,
               "A weight per gdpo_reward_keys entry; empty: 1 each.")
          .key("norm_adv_by_std_in_grpo", &GdpoOptions::norm_adv_by_std_in_grpo,
               "Divide each component by its group std (GRPO); false: score - mean only."),
      [](const GdpoOptions& options) { return std::make_unique<GdpoEstimator>(options); });
  registrar.add<AdvantageEstimator>("rloo", "RLOO: score minus the mean of the prompt's other responses",
                                    OptionsSchema<NoOptions>(),
                                    [](const NoOptions&) { return std::make_unique<RlooEstimator>(false); });
  registrar.add<AdvantageEstimator>(
      "rloo_vectorized", "RLOO in verl's vectorized form: a prompt's only response gets 0, not its score",
      OptionsSchema<NoOptions>(), [](const NoOptions&) { return std::make_unique<RlooEstimator>(true); });
  registrar.add<AdvantageEstimator>("opo", "OPO: score minus the length-weighted group mean",
                                    OptionsSchema<NoOptions>(),
                                    [](const NoOptions&) { return std::make_unique<OpoEstimator>(); });
  registrar.add<AdvantageEstimator>(
      "gpg", "GPG: (score - group mean) scaled by batch size / nonzero scores, over f_norm",
      OptionsSchema<GpgOptions>().key("f_norm", &GpgOptions::f_norm, "GPG's normalizer (verl's default 1.0).",
                                      greater_than(0.0)),
      [](const GpgOptions& options) { return std::make_unique<GpgEstimator>(options); });
  registrar.add<AdvantageEstimator>(
      "reinforce_plus_plus_baseline", "REINFORCE++ with the group mean as baseline, whitened over the batch",
      OptionsSchema<NoOptions>(),
      [](const NoOptions&) { return std::make_unique<ReinforcePlusPlusBaselineEstimator>(); });
}

}  // namespace rlcore::algorithms
