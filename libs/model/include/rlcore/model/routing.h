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

// The load-balancing loss (load_balancing_loss in layers.h) split by sparse
// layer, for an engine that runs and differentiates one layer at a time:
// summed over the sparse layers, the parts are the loss, and each part's
// gradient is the loss's with respect to its layer's router logits.
class LoadBalancingParts {
 public:
  // f_e, the share of top-k choices of expert e, over the real tokens
  // (attention_mask [tokens...] 1; all when undefined) of every sparse layer
  // `routing` recorded.
  LoadBalancingParts(const MoeRouting& routing, int64_t num_experts, const at::Tensor& attention_mask = {});
  // num_experts * sum_e f_e * P_e(layer) / sparse layers, where P_e(layer) is
  // e's mean router probability over the layer's real tokens.
  at::Tensor part(const at::Tensor& router_logits) const;
  bool empty() const { return layers_ == 0; }

 private:
  at::Tensor share_;  // [num_experts]
  at::Tensor real_;   // [tokens] float, 1 for a real token
  int64_t num_experts_ = 0;
  int64_t layers_ = 0;
};

// Megatron's router z-loss of one sparse layer (ST-MoE): the mean over real
// tokens of logsumexp(router logits)^2. attention_mask as above.
at::Tensor router_z_loss(const at::Tensor& router_logits, const at::Tensor& attention_mask = {});

}  // namespace rlcore::model
