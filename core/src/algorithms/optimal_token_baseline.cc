// The optimal token baseline (verl's optimal_token_baseline and
// tir_optimal_token_baseline): a baseline per token position and prompt group,
// each return weighted by the path-variance proxy accumulated so far,
//   B_t = sum_i G_it W_it / (sum_i W_it + 1e-8),   W_it = sum_{j<=t} w_ij,
//   w_ij = (1 - 2 pi_ij + sum_v pi_v^2) * rho_ij^2,
// where pi_ij = exp(old log-prob), sum_v pi_v^2 comes from the actor
// (actor.calculate_sum_pi_squared) and rho the rollout-correction IS weight
// when there is one. tir_ aligns the responses' tokens (multi-turn responses
// carry masked tool output between turns) before taking the baseline.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <map>
#include <string>
#include <vector>

#include "algorithms/internal.h"
#include "rlcore/advantage_estimator.h"
#include "rlcore/error.h"
#include "rlcore/rl_functional.h"

namespace rlcore::algorithms {
namespace {

constexpr double kEpsilon = 1e-8;  // verl's default epsilon

struct NoOptions {};

// The rows of each prompt group, in row order, by group id.
std::map<int64_t, std::vector<int64_t>> groups_of(const at::Tensor& index) {
  std::map<int64_t, std::vector<int64_t>> groups;
  const at::Tensor ids = index.to(at::kLong).contiguous();
  const int64_t* id = ids.data_ptr<int64_t>();
  for (int64_t row = 0; row < ids.numel(); ++row) groups[id[row]].push_back(row);
  return groups;
}

// The reward-to-go G and the cumulative path-variance proxy W, [B, T] each.
struct ReturnsAndWeights {
  at::Tensor returns;
  at::Tensor w_cumulative;
};

ReturnsAndWeights returns_and_weights(const AdvantageInput& input, const char* estimator) {
  validate_advantage_input(input, kNeedsIndex, estimator);
  const at::IntArrayRef shape = input.token_level_rewards.sizes();
  const std::string prefix = std::string("advantage estimator '") + estimator + "': ";
  if (!input.sum_pi_squared.defined()) {
    throw ValueError(prefix +
                     "needs sum_pi_squared from the actor; set "
                     "actor_rollout_ref.actor.calculate_sum_pi_squared=true");
  }
  if (!input.old_log_probs.defined()) throw ValueError(prefix + "needs the actor's old_log_probs");
  try {
    require_shape(input.sum_pi_squared, shape, "sum_pi_squared");
    require_shape(input.old_log_probs, shape, "old_log_probs");
    if (input.rollout_is_weights.defined()) require_shape(input.rollout_is_weights, shape, "rollout_is_weights");
  } catch (const ValueError& e) {
    throw ValueError(prefix + e.what());
  }
  const at::Tensor rewards = input.token_level_rewards;
  const at::Tensor mask = float_mask(input.response_mask, rewards);
  ReturnsAndWeights out;
  out.returns = (rewards * mask).flip({-1}).cumsum(-1).flip({-1});
  at::Tensor w = 1 - 2 * input.old_log_probs.to(rewards.scalar_type()).exp() + input.sum_pi_squared;
  if (input.rollout_is_weights.defined()) w = w * input.rollout_is_weights.square();
  out.w_cumulative = (w * mask).cumsum(-1);
  return out;
}

// verl's handle_zero_tail: when one response of the group is strictly the
// longest, its baseline past the second-longest length is 0 (no other
// response informs it). `lengths` are the group's response lengths.
void zero_tail(at::Tensor& baselines, const std::vector<int64_t>& rows, const std::vector<int64_t>& lengths) {
  int64_t longest = -1, second = -1, longest_count = 0, longest_row = -1;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (lengths[i] > longest) {
      second = longest;
      longest = lengths[i];
      longest_count = 1;
      longest_row = rows[i];
    } else if (lengths[i] == longest) {
      ++longest_count;
      second = longest;
    } else if (lengths[i] > second) {
      second = lengths[i];
    }
  }
  if (longest_count == 1 && longest > second) baselines[longest_row].slice(0, second).zero_();
}

std::vector<int64_t> row_lengths(const at::Tensor& mask) {
  const at::Tensor lengths = mask.sum(-1).to(at::kLong).contiguous();
  return std::vector<int64_t>(lengths.data_ptr<int64_t>(), lengths.data_ptr<int64_t>() + lengths.numel());
}

// Each group's baseline B_t = sum_i G_it W_it / (sum_i W_it + 1e-8), given to
// every row of the group (a lone response keeps baseline 0), then zero_tail.
// `weights` is 0 wherever a row has no token.
at::Tensor group_baselines(const std::map<int64_t, std::vector<int64_t>>& groups, const at::Tensor& returns,
                           const at::Tensor& weights, const std::vector<int64_t>& lengths) {
  at::Tensor baselines = at::zeros_like(returns);
  for (const auto& [id, rows] : groups) {
    if (rows.size() == 1) continue;
    const at::Tensor idx = at::tensor(rows, at::kLong).to(returns.device());
    const at::Tensor g = returns.index_select(0, idx);
    const at::Tensor w = weights.index_select(0, idx);
    const at::Tensor baseline = (g * w).sum(0) / (w.sum(0) + kEpsilon);
    std::vector<int64_t> group_lengths;
    for (int64_t row : rows) {
      baselines[row].copy_(baseline);
      group_lengths.push_back(lengths[row]);
    }
    zero_tail(baselines, rows, group_lengths);
  }
  return baselines;
}

class OptimalTokenBaselineEstimator final : public AdvantageEstimator {
 public:
  AdvantageNeeds needs() const override { return kNeedsIndex; }

  AdvantageOutput compute(const AdvantageInput& input) const override {
    at::NoGradGuard no_grad;
    const ReturnsAndWeights rw = returns_and_weights(input, "optimal_token_baseline");
    const at::Tensor mask = float_mask(input.response_mask, rw.returns);
    const at::Tensor baselines =
        group_baselines(groups_of(input.index), rw.returns, rw.w_cumulative * mask, row_lengths(mask));
    return {(rw.returns - baselines) * mask, rw.returns};
  }
};

// The same with each response's tokens packed to the left first, so position t
// is a response's t-th generated token wherever the mask has gaps.
class TirOptimalTokenBaselineEstimator final : public AdvantageEstimator {
 public:
  AdvantageNeeds needs() const override { return kNeedsIndex; }

  AdvantageOutput compute(const AdvantageInput& input) const override {
    at::NoGradGuard no_grad;
    const ReturnsAndWeights rw = returns_and_weights(input, "tir_optimal_token_baseline");
    const at::Tensor mask = float_mask(input.response_mask, rw.returns);
    const at::Tensor valid = mask.gt(0);
    const std::vector<int64_t> lengths = row_lengths(mask);
    const int64_t rows_total = rw.returns.size(0);
    int64_t longest = 0;
    for (int64_t length : lengths) longest = std::max(longest, length);
    at::Tensor packed_w = at::zeros({rows_total, longest}, rw.w_cumulative.options());
    at::Tensor packed_returns = at::zeros_like(packed_w);
    std::vector<int64_t> nonempty_index;
    for (int64_t row = 0; row < rows_total; ++row) {
      if (lengths[row] == 0) continue;
      packed_w[row].slice(0, 0, lengths[row]).copy_(rw.w_cumulative[row].masked_select(valid[row]));
      packed_returns[row].slice(0, 0, lengths[row]).copy_(rw.returns[row].masked_select(valid[row]));
    }
    // Empty responses join no group.
    std::map<int64_t, std::vector<int64_t>> groups;
    const at::Tensor ids = input.index.to(at::kLong).contiguous();
    for (int64_t row = 0; row < rows_total; ++row) {
      if (lengths[row] > 0) groups[ids.data_ptr<int64_t>()[row]].push_back(row);
    }
    const at::Tensor packed_advantages = packed_returns - group_baselines(groups, packed_returns, packed_w, lengths);
    at::Tensor advantages = at::zeros_like(rw.returns);
    for (int64_t row = 0; row < rows_total; ++row) {
      if (lengths[row] == 0) continue;
      advantages[row].masked_scatter_(valid[row], packed_advantages[row].slice(0, 0, lengths[row]));
    }
    return {advantages * mask, rw.returns};
  }
};

}  // namespace

void register_optimal_token_baseline_estimators(PluginRegistrar& registrar) {
  registrar.add<AdvantageEstimator>(
      "optimal_token_baseline",
      "Optimal token baseline: per position, the group's returns weighted by the path-variance proxy "
      "(needs actor.calculate_sum_pi_squared)",
      OptionsSchema<NoOptions>(), [](const NoOptions&) { return std::make_unique<OptimalTokenBaselineEstimator>(); });
  registrar.add<AdvantageEstimator>(
      "tir_optimal_token_baseline",
      "Optimal token baseline over each response's generated tokens packed together (multi-turn, tool output "
      "masked; needs actor.calculate_sum_pi_squared)",
      OptionsSchema<NoOptions>(),
      [](const NoOptions&) { return std::make_unique<TirOptimalTokenBaselineEstimator>(); });
}

}  // namespace rlcore::algorithms
