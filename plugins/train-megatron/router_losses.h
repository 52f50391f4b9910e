// The router's auxiliary losses on one pipeline stage: the load-balancing loss
// (transformers' load_balancing_loss_func, as model::load_balancing_loss, over
// every sparse layer of the model together) and the z-loss (Megatron-core's
// z_loss_func: mean over tokens of logsumexp(router logits)^2, averaged over
// the sparse layers). A stage sees only its layers: its part of each loss sums
// with the other stages' parts to the whole, differentiable in its own routers.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/comm_context.h"
#include "rlcore/model/config.h"
#include "rlcore/model/layers.h"

namespace rlcore::train_megatron {

struct RouterLosses {
  at::Tensor aux;     // scalar: this stage's part of the load-balancing loss
  at::Tensor z_loss;  // scalar: this stage's part of the z-loss
};

// One entry per micro-batch: `routing[m]` (this stage's sparse layers) and the
// micro-batch's attention_mask [b, T] (padding excluded). The expert counts and
// token totals are summed over `pp` (one all-reduce for all micro-batches), so
// every stage of the pipeline must call it together.
std::vector<RouterLosses> stage_router_losses(const model::ModelConfig& config,
                                              const std::vector<model::MoeRouting>& routing,
                                              const std::vector<at::Tensor>& attention_masks, const CommGroup& pp);

}  // namespace rlcore::train_megatron
