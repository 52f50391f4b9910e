// Expert parallelism's token dispatch: a sparse layer's (token, chosen expert)
// pairs go to the expert-parallel rank holding that expert, through the local
// experts, and back, weighted and summed per token (Megatron-core's all-to-all
// token dispatcher). Differentiable: the backward of each all-to-all is the
// reverse all-to-all.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "rlcore/comm_context.h"
#include "rlcore/model/layers.h"

namespace rlcore::train_megatron {

// What moe.apply_experts computes, with the experts split over `ep`: rank r
// holds global experts [r * L, (r + 1) * L) as moe.experts (L of them); the
// router's choices in `routed` are global. tokens [N, hidden] -> [N, hidden].
// Every rank of `ep` must call it for the layer (a collective).
at::Tensor dispatch_to_experts(const model::SparseMoe& moe, const at::Tensor& tokens, const model::Routed& routed,
                               const CommGroup& ep);

}  // namespace rlcore::train_megatron
