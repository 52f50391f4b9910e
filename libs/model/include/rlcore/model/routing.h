// A forward's routing as one tensor, the layout routing replay carries
// (columns::kRoutedExperts): [tokens..., sparse layers, top_k] int64, the
// sparse layers in model order.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/model/config.h"
#include "rlcore/model/layers.h"

namespace rlcore::model {

// The model's sparse layer indices, in order (empty for a dense model).
std::vector<int64_t> sparse_layers(const ModelConfig& config);

// The chosen experts of every sparse layer `routing` recorded, stacked:
// [token_shape..., sparse layers, top_k]. ValueError when a sparse layer of
// `config` recorded nothing or a different number of tokens.
at::Tensor stack_routing(const MoeRouting& routing, const ModelConfig& config, at::IntArrayRef token_shape);

// The inverse: a MoeRouting to replay (ForwardContext::replay) from
// `routed` [token_shape..., sparse layers, top_k], moved to `device`.
// ValueError naming the shape when it does not fit `config`.
MoeRouting unstack_routing(const at::Tensor& routed, const ModelConfig& config, const at::Device& device);

}  // namespace rlcore::model
