// What the in-process FsdpEngine tests share: a policy-gradient loss, an engine
// context over a checkpoint, and copies of the full parameters.
#pragma once

#include "fsdp_testing.h"

#include <string>
#include <vector>

#include "fsdp_engine.h"
#include "rlcore/registry.h"
#include "rlcore/train_engine.h"

namespace fsdp_test {

// -sum(log_prob * advantages * mask) / tokens, scaled by dp_size as the engine's losses are.
inline rlcore::LossOutput pg_loss(const rlcore::Batch& micro, const rlcore::ModelOutput& out,
                                  const rlcore::GlobalBatchInfo& g) {
  const at::Tensor loss =
      -(out.log_prob * micro.tensor("advantages") * micro.tensor("response_mask")).sum() / g.num_tokens * g.dp_size;
  return {loss, {{"loss", loss.detach()}}};
}

// An engine's context over the checkpoint in `model`, for a run of `total_steps` steps.
inline rlcore::ComponentContext context_for(const std::string& model, int64_t total_steps) {
  rlcore::ComponentContext context;
  context.model_path = model;
  context.total_training_steps = total_steps;
  return context;
}

inline rlcore::ComponentContext context_for(const TempDir& model) { return context_for(model.str(), 4); }

// Each full (unsharded) parameter, cloned, in the engine's order.
inline std::vector<at::Tensor> full_parameters(rlcore::train_fsdp::FsdpEngine& engine) {
  std::vector<at::Tensor> out;
  engine.for_each_full_parameter([&](const std::string&, const at::Tensor& full) { out.push_back(full.clone()); });
  return out;
}

}  // namespace fsdp_test
