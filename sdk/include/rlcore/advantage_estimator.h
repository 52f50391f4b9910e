// AdvantageEstimator: the `advantage_estimator` extension point (verl's
// algorithm.adv_estimator). Turns token-level rewards into advantages and
// returns; the built-ins (gae, grpo, rloo, ...) are registered by the core.
#pragma once

#include <map>
#include <string>

#include <ATen/core/Tensor.h>

#include "rlcore/columns.h"
#include "rlcore/export.h"

namespace rlcore {

class Batch;

// What an estimator reads. All [B, T] tensors share one shape; T is the
// padded response length and response_mask marks the response tokens.
struct AdvantageInput {
  at::Tensor token_level_rewards;  // [B, T] floating
  at::Tensor response_mask;        // [B, T] bool / integer / floating, nonzero = response token
  at::Tensor values;               // [B, T] critic values (gae); undefined otherwise
  at::Tensor index;                // [B] integer group id: rows of one prompt share it (verl's uid)
  at::Tensor reward_baselines;     // [B] reward of the greedy response (remax); undefined otherwise
  // [B] per-response reward components by name: the graders' extra scores ("acc", "format", ...),
  // for estimators that normalize each one apart (gdpo); advantage_input_from_batch fills it from
  // the columns::kRewardComponentPrefix columns. SDK 4.1: appended.
  std::map<std::string, at::Tensor> reward_components;
  // [B, T] each, undefined when the batch lacks the column; SDK 4.2: appended. The optimal
  // token baseline's inputs: the actor's log-probs before the update (columns::kOldLogProbs),
  // Σπ² at each token (columns::kSumPiSquared) and the rollout-correction IS weights
  // (columns::kRolloutIsWeights).
  at::Tensor old_log_probs;
  at::Tensor sum_pi_squared;
  at::Tensor rollout_is_weights;
};

struct AdvantageOutput {
  at::Tensor advantages;  // [B, T]
  at::Tensor returns;     // [B, T]
};

// Which optional inputs an estimator needs, so the trainer knows whether to
// run a critic, keep group ids or generate greedy baselines.
struct AdvantageNeeds {
  bool values = false;
  bool index = false;
  bool reward_baselines = false;
};

class RLCORE_API AdvantageEstimator {
 public:
  static constexpr const char* kKind = "advantage_estimator";

  virtual ~AdvantageEstimator();

  virtual AdvantageNeeds needs() const { return {}; }

  // Must not modify the input tensors. Throws ValueError naming a missing or
  // misshapen tensor. Results carry no autograd history.
  virtual AdvantageOutput compute(const AdvantageInput& input) const = 0;
};

// Throws ValueError naming `estimator` and the tensor at fault unless the
// rewards and mask are [B, T] and each input in `needs` is present with its shape.
RLCORE_API void validate_advantage_input(const AdvantageInput& input, const AdvantageNeeds& needs,
                                         const std::string& estimator);

// Gathers an AdvantageInput from a batch's columns: token_level_rewards,
// response_mask, and when present values, reward_baselines and the group
// column `group_key` (an integer tensor, or a non-tensor column of strings or
// numbers such as verl's uid, numbered in order of first appearance).
RLCORE_API AdvantageInput advantage_input_from_batch(const Batch& batch, const std::string& group_key = columns::kUid);

}  // namespace rlcore
