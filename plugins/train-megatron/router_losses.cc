// The router's load-balancing loss and z-loss, split over pipeline stages.
#include "router_losses.h"

#include <ATen/ATen.h>

namespace rlcore::train_megatron {

std::vector<RouterLosses> stage_router_losses(const model::ModelConfig& config,
                                              const std::vector<model::MoeRouting>& routing,
                                              const std::vector<at::Tensor>& attention_masks, const CommGroup& pp) {
  const int64_t experts = config.num_experts;
  int64_t sparse_layers = 0;
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) sparse_layers += config.layer_is_sparse(layer);
  const size_t micro = routing.size();
  const at::TensorOptions fp32 = at::TensorOptions().dtype(at::kFloat).device(attention_masks.front().device());
  // Per micro-batch: [expert counts..., real tokens] over this stage's layers (no gradient).
  at::Tensor totals = at::zeros({static_cast<int64_t>(micro), experts + 1}, fp32);
  std::vector<at::Tensor> probs(micro), z_sums(micro);
  for (size_t m = 0; m < micro; ++m) {
    const at::Tensor real = attention_masks[m].reshape({-1}).to(at::kFloat);
    const at::Tensor real_count = real.sum().clamp_min(1.0);
    probs[m] = at::zeros({experts}, fp32);
    z_sums[m] = at::zeros({}, fp32);
    for (size_t layer = 0; layer < routing[m].chosen.size(); ++layer) {
      const at::Tensor& chosen = routing[m].chosen[layer];
      if (!chosen.defined()) continue;
      const at::Tensor logits = routing[m].router_logits[layer].to(at::kFloat);
      const at::Tensor p = at::softmax(logits, -1);
      probs[m] = probs[m] + (p * real.unsqueeze(-1)).sum(0);
      z_sums[m] = z_sums[m] + (at::logsumexp(logits, -1).pow(2) * real).sum() / real_count;
      at::Tensor row = totals[static_cast<int64_t>(m)];
      row.narrow(0, 0, experts).scatter_add_(0, chosen.reshape(-1), real.repeat_interleave(chosen.size(1)).detach());
      row.narrow(0, experts, 1).add_(real.sum().detach());
    }
  }
  if (pp.size() > 1) pp.all_reduce(totals);
  std::vector<RouterLosses> out(micro);
  for (size_t m = 0; m < micro; ++m) {
    const at::Tensor counts = totals[static_cast<int64_t>(m)].narrow(0, 0, experts);
    const at::Tensor rows = totals[static_cast<int64_t>(m)][experts].clamp_min(1.0);
    out[m].aux = (counts / rows * (probs[m] / rows)).sum() * static_cast<double>(experts);
    out[m].z_loss = z_sums[m] / static_cast<double>(std::max<int64_t>(sparse_layers, 1));
  }
  return out;
}

}  // namespace rlcore::train_megatron
