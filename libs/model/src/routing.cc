// Stacking a forward's per-layer routing into the replay layout and back.
#include "rlcore/model/routing.h"

#include <string>

#include <ATen/ATen.h>

#include "rlcore/error.h"

namespace rlcore::model {
namespace {

std::string shape_text(at::IntArrayRef sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + "]";
}

}  // namespace

std::vector<int64_t> sparse_layers(const ModelConfig& config) {
  std::vector<int64_t> out;
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    if (config.layer_is_sparse(layer)) out.push_back(layer);
  }
  return out;
}

at::Tensor stack_routing(const MoeRouting& routing, const ModelConfig& config, at::IntArrayRef token_shape) {
  std::vector<at::Tensor> layers;
  std::vector<int64_t> shape(token_shape.begin(), token_shape.end());
  shape.push_back(config.num_experts_per_tok);
  for (const int64_t layer : sparse_layers(config)) {
    const auto index = static_cast<size_t>(layer);
    if (index >= routing.chosen.size() || !routing.chosen[index].defined()) {
      throw ValueError("routing: sparse layer " + std::to_string(layer) + " recorded no routing");
    }
    const at::Tensor& chosen = routing.chosen[index];
    if (chosen.numel() != c10::multiply_integers(shape)) {
      throw ValueError("routing: sparse layer " + std::to_string(layer) + " routed " + shape_text(chosen.sizes()) +
                       ", not the tokens " + shape_text(token_shape) + " x top_k " +
                       std::to_string(config.num_experts_per_tok));
    }
    layers.push_back(chosen.reshape(shape));
  }
  if (layers.empty()) throw ValueError("routing: " + config.model_type + " has no sparse layers");
  return at::stack(layers, static_cast<int64_t>(token_shape.size()));
}

MoeRouting unstack_routing(const at::Tensor& routed, const ModelConfig& config, const at::Device& device) {
  const std::vector<int64_t> layers = sparse_layers(config);
  const int64_t dims = routed.defined() ? routed.dim() : 0;
  if (dims < 3 || routed.size(dims - 2) != static_cast<int64_t>(layers.size()) ||
      routed.size(dims - 1) != config.num_experts_per_tok) {
    throw ValueError("routed_experts must be [tokens..., " + std::to_string(layers.size()) + " sparse layers, " +
                     std::to_string(config.num_experts_per_tok) + " (top_k)] for " + config.model_type + ", got " +
                     (routed.defined() ? shape_text(routed.sizes()) : std::string("<undefined>")));
  }
  const at::Tensor on_device = routed.to(device, at::kLong).reshape({-1, routed.size(dims - 2), routed.size(dims - 1)});
  MoeRouting out(static_cast<size_t>(config.num_hidden_layers));
  for (size_t s = 0; s < layers.size(); ++s) {
    out.chosen[static_cast<size_t>(layers[s])] = on_device.select(1, static_cast<int64_t>(s));
  }
  return out;
}

namespace {

// [tokens] float: 1 for a real token (every one when `attention_mask` is undefined).
at::Tensor real_tokens(const at::Tensor& attention_mask, const at::Tensor& router_logits) {
  const at::TensorOptions options = router_logits.options().dtype(at::kFloat);
  return attention_mask.defined() ? attention_mask.reshape({-1}).to(options)
                                  : at::ones({router_logits.size(0)}, options);
}

}  // namespace

LoadBalancingParts::LoadBalancingParts(const MoeRouting& routing, int64_t num_experts, const at::Tensor& attention_mask)
    : num_experts_(num_experts) {
  at::Tensor counts;
  double rows = 0;
  for (size_t layer = 0; layer < routing.chosen.size(); ++layer) {
    const at::Tensor& chosen = routing.chosen[layer];
    if (!chosen.defined()) continue;
    real_ = real_tokens(attention_mask, routing.router_logits[layer]);
    const at::Tensor layer_counts = at::zeros({num_experts}, real_.options())
                                        .scatter_add_(0, chosen.reshape(-1), real_.repeat_interleave(chosen.size(1)));
    counts = counts.defined() ? counts + layer_counts : layer_counts;
    rows += real_.sum().item<double>();
    ++layers_;
  }
  if (layers_ > 0) share_ = counts / rows;
}

at::Tensor LoadBalancingParts::part(const at::Tensor& router_logits) const {
  const at::Tensor p = at::softmax(router_logits.to(at::kFloat), -1);
  const at::Tensor mean_prob = (p * real_.unsqueeze(-1)).sum(0) / real_.sum();
  return (share_ * mean_prob).sum() * static_cast<double>(num_experts_) / static_cast<double>(layers_);
}

at::Tensor load_balancing_loss(const MoeRouting& routing, int64_t num_experts, const at::Tensor& attention_mask) {
  const LoadBalancingParts parts(routing, num_experts, attention_mask);
  at::Tensor loss = at::zeros({});
  for (size_t layer = 0; layer < routing.chosen.size(); ++layer) {
    if (routing.chosen[layer].defined()) loss = loss + parts.part(routing.router_logits[layer]);
  }
  return loss;
}

at::Tensor router_z_loss(const at::Tensor& router_logits, const at::Tensor& attention_mask) {
  const at::Tensor real = real_tokens(attention_mask, router_logits);
  return (at::logsumexp(router_logits.to(at::kFloat), -1).square() * real).sum() / real.sum();
}

}  // namespace rlcore::model
