// The router's losses of one micro-batch, split by sparse layer.
#include "train-common/router_losses.h"

#include <ATen/ATen.h>

namespace rlcore::train_common {

MicroBatchRouterLoss::MicroBatchRouterLoss(const model::MoeRouting& routing, const model::ModelConfig& config,
                                           const at::Tensor& attention_mask, double weight, RouterLossCoeffs coeffs)
    : balance_(routing, config.num_experts, attention_mask),
      mask_(attention_mask),
      sparse_layers_(static_cast<int64_t>(model::sparse_layers(config).size())),
      weight_(weight),
      coeffs_(coeffs) {}

at::Tensor MicroBatchRouterLoss::layer_part(const at::Tensor& router_logits) const {
  at::Tensor part = at::zeros({}, router_logits.options().dtype(at::kFloat));
  if (coeffs_.aux != 0) part = part + balance_.part(router_logits) * coeffs_.aux;
  if (coeffs_.z != 0) {
    part = part + model::router_z_loss(router_logits, mask_) * (coeffs_.z / static_cast<double>(sparse_layers_));
  }
  return part * weight_;
}

std::map<std::string, at::Tensor> MicroBatchRouterLoss::metrics(const model::MoeRouting& routing) const {
  at::Tensor aux = at::zeros({});
  at::Tensor z = at::zeros({});
  int64_t layers = 0;
  for (size_t layer = 0; layer < routing.chosen.size(); ++layer) {
    if (!routing.chosen[layer].defined()) continue;
    const at::Tensor logits = routing.router_logits[layer].detach();
    aux = aux + balance_.part(logits).cpu();
    z = z + model::router_z_loss(logits, mask_).cpu();
    ++layers;
  }
  return {{kMoeAuxLoss, aux}, {kMoeZLoss, layers > 0 ? z / static_cast<double>(layers) : z}};
}

}  // namespace rlcore::train_common
