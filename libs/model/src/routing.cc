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

}  // namespace rlcore::model
