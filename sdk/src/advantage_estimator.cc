// AdvantageEstimator's vtable anchor, input checks and the Batch adapter.
#include "rlcore/advantage_estimator.h"

#include <ATen/ATen.h>

#include <map>

#include <nlohmann/json.hpp>

#include "rlcore/batch.h"
#include "rlcore/columns.h"
#include "rlcore/error.h"
#include "rlcore/rl_functional.h"

namespace rlcore {

AdvantageEstimator::~AdvantageEstimator() = default;

void validate_advantage_input(const AdvantageInput& input, const AdvantageNeeds& needs, const std::string& estimator) {
  try {
    require_float_matrix(input.token_level_rewards, "token_level_rewards");
    const at::IntArrayRef shape = input.token_level_rewards.sizes();
    require_shape(input.response_mask, shape, "response_mask");
    if (needs.values) {
      require_shape(input.values, shape, "values");
      require_float_matrix(input.values, "values");
    }
    if (needs.index) {
      require_shape(input.index, {shape[0]}, "index");
      if (at::isFloatingType(input.index.scalar_type()) || input.index.scalar_type() == at::kBool) {
        throw ValueError("tensor 'index' must hold integer group ids");
      }
    }
    if (needs.reward_baselines) require_shape(input.reward_baselines, {shape[0]}, "reward_baselines");
  } catch (const ValueError& e) {
    throw ValueError("advantage estimator '" + estimator + "': " + e.what());
  }
}

namespace {

// Numbers group ids in order of first appearance; equal JSON values share one.
at::Tensor group_ids_from_json(const std::vector<nlohmann::json>& column, const std::string& key) {
  std::map<std::string, int64_t> ids;
  at::Tensor index = at::empty({static_cast<int64_t>(column.size())}, at::kLong);
  int64_t* out = index.data_ptr<int64_t>();
  for (size_t row = 0; row < column.size(); ++row) {
    const nlohmann::json& value = column[row];
    if (!value.is_string() && !value.is_number()) {
      throw ValueError("column '" + key + "' row " + std::to_string(row) +
                       ": a group id must be a string or a number, got " + value.dump());
    }
    out[row] = ids.emplace(value.dump(), static_cast<int64_t>(ids.size())).first->second;
  }
  return index;
}

}  // namespace

AdvantageInput advantage_input_from_batch(const Batch& batch, const std::string& group_key) {
  for (const char* key : {columns::kTokenLevelRewards, columns::kResponseMask}) {
    if (!batch.contains(key) || !batch.is_tensor(key)) {
      throw ValueError(std::string("the batch has no tensor column '") + key + "', which advantage estimation needs");
    }
  }
  AdvantageInput input;
  input.token_level_rewards = batch.tensor(columns::kTokenLevelRewards);
  input.response_mask = batch.tensor(columns::kResponseMask);
  auto optional_tensor = [&batch](const char* key) {
    return batch.contains(key) && batch.is_tensor(key) ? batch.tensor(key) : at::Tensor();
  };
  input.values = optional_tensor(columns::kValues);
  input.reward_baselines = optional_tensor(columns::kRewardBaselines);
  input.old_log_probs = optional_tensor(columns::kOldLogProbs);
  input.sum_pi_squared = optional_tensor(columns::kSumPiSquared);
  input.rollout_is_weights = optional_tensor(columns::kRolloutIsWeights);
  const std::string prefix = columns::kRewardComponentPrefix;
  for (const std::string& key : batch.tensor_keys()) {
    if (key.compare(0, prefix.size(), prefix) == 0)
      input.reward_components[key.substr(prefix.size())] = batch.tensor(key);
  }
  if (batch.contains(group_key)) {
    input.index = batch.is_tensor(group_key) ? batch.tensor(group_key).to(at::kLong)
                                             : group_ids_from_json(batch.non_tensor(group_key), group_key);
  }
  return input;
}

}  // namespace rlcore
