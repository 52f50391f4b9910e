// The router's auxiliary losses a train engine adds to its loss for a mixture
// of experts, one micro-batch at a time: the load-balancing loss
// (transformers' definition, over every sparse layer together) times
// moe_aux_loss_coeff, and the z-loss (Megatron's per layer, averaged over the
// sparse layers) times moe_z_loss_coeff; each micro-batch's share of the
// step is 1 / micro-batches, as Megatron scales them.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <ATen/core/Tensor.h>

#include "rlcore/model/config.h"
#include "rlcore/model/layers.h"
#include "rlcore/model/routing.h"

namespace rlcore::train_common {

struct RouterLossCoeffs {
  double aux = 0;  // moe_aux_loss_coeff
  double z = 0;    // moe_z_loss_coeff
  bool any() const { return aux != 0 || z != 0; }
};

// The metric names the engines report (the worker puts them under the role: actor/moe_aux_loss).
inline constexpr const char* kMoeAuxLoss = "moe_aux_loss";
inline constexpr const char* kMoeZLoss = "moe_z_loss";

class MicroBatchRouterLoss {
 public:
  // `routing`: what the micro-batch's forward routed (every sparse layer);
  // `attention_mask` [rows, L] its real tokens; `weight` its share of the
  // step's loss.
  MicroBatchRouterLoss(const model::MoeRouting& routing, const model::ModelConfig& config,
                       const at::Tensor& attention_mask, double weight, RouterLossCoeffs coeffs);

  // Sparse layer `layer`'s part of the weighted router loss, from its router
  // logits (with gradient): summed over the sparse layers, coeff * loss * weight.
  at::Tensor layer_part(const at::Tensor& router_logits) const;
  // The unweighted losses of the recorded forward, detached: moe_aux_loss and moe_z_loss.
  std::map<std::string, at::Tensor> metrics(const model::MoeRouting& routing) const;

 private:
  model::LoadBalancingParts balance_;
  at::Tensor mask_;
  int64_t sparse_layers_;
  double weight_;
  RouterLossCoeffs coeffs_;
};

}  // namespace rlcore::train_common
