// LoRA adapters of the fsdp engine: options, creation, the adapted forward and
// gradient bookkeeping (the AdamW step is the engine's).
#include "lora_adapters.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include "lora_targets.h"
#include "rlcore/error.h"

namespace rlcore::train_fsdp {
namespace {

model::Linear* projection(model::DecoderLayer& layer, const std::string& name) {
  if (name == "q_proj") return &layer.self_attn.q_proj;
  if (name == "k_proj") return &layer.self_attn.k_proj;
  if (name == "v_proj") return &layer.self_attn.v_proj;
  if (name == "o_proj") return &layer.self_attn.o_proj;
  if (name == "gate_proj") return &layer.mlp.gate_proj;
  if (name == "up_proj") return &layer.mlp.up_proj;
  return &layer.mlp.down_proj;
}

}  // namespace

OptionsSchema<LoraOptions> lora_options_schema() {
  OptionsSchema<LoraOptions> schema;
  schema
      .key("lora_rank", &LoraOptions::lora_rank,
           "LoRA rank r (verl's model.lora_rank); 0 trains the whole model. > 0 freezes the base weights and "
           "trains adapters A [r, in], B [out, r] on the target modules.",
           at_least(0))
      .key("lora_alpha", &LoraOptions::lora_alpha,
           "LoRA alpha (verl's model.lora_alpha): the adapter output is scaled by lora_alpha / lora_rank.")
      .key("target_modules", &LoraOptions::target_modules,
           "Projections that get adapters (verl's model.target_modules): all-linear (every projection of every "
           "decoder layer, not the lm_head), or names among q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
           "down_proj (a dotted suffix such as self_attn.q_proj too), or regular expressions over full module names "
           "(model.layers.0.self_attn.q_proj).",
           {}, read_one_or_many)
      .key("exclude_modules", &LoraOptions::exclude_modules,
           "Modules taken out of target_modules (verl's model.exclude_modules), in the same forms: e.g. down_proj, "
           "or '.*layers\\.0\\..*' for the first layer. An entry that selects no module is an error.",
           {}, read_one_or_many)
      .key("use_rslora", &LoraOptions::use_rslora,
           "PEFT's rank-stabilised LoRA: scale the adapter output by lora_alpha / sqrt(lora_rank) instead of "
           "lora_alpha / lora_rank (taken from the adapter with lora_adapter_path).")
      .key("lora_adapter_path", &LoraOptions::lora_adapter_path,
           "PEFT adapter directory (adapter_config.json, adapter_model.safetensors) to continue training from "
           "(verl's model.lora_adapter_path): its r, lora_alpha and modules replace the keys above.");
  return schema;
}

LoraAdapters::LoraAdapters(const LoraOptions& options, model::Transformer& skeleton, const at::Device& device,
                           uint64_t seed)
    : options_(options) {
  if (options.lora_rank < 0)
    throw ConfigError("fsdp: lora.lora_rank must be >= 0 (0 = off), got " + std::to_string(options.lora_rank));
  if (options.lora_rank == 0) return;
  if (skeleton.config().is_moe()) {
    throw ConfigError("fsdp: lora.lora_rank > 0 on a mixture of experts (" + skeleton.config().model_type +
                      ") is not supported: LoRA adapts the dense projections; train the MoE with lora_rank 0");
  }
  num_layers_ = static_cast<int64_t>(skeleton.layers.size());
  std::vector<std::string> candidates;
  for (size_t l = 0; l < skeleton.layers.size(); ++l)
    for (const std::string& name : projection_names())
      candidates.push_back(projection_module(static_cast<int64_t>(l), name));
  const std::vector<std::string> modules = select_modules(candidates, options.target_modules, options.exclude_modules);
  for (const std::string& name : projection_names()) {
    if (std::any_of(modules.begin(), modules.end(), [&](const std::string& m) { return projection_of(m) == name; }))
      target_names_.push_back(name);
  }
  const int64_t r = options.lora_rank;
  scaling_ = options.lora_alpha / (options.use_rslora ? std::sqrt(static_cast<double>(r)) : static_cast<double>(r));
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::TensorOptions fp32 = at::TensorOptions().dtype(at::kFloat).device(device);
  at::NoGradGuard no_grad;
  for (size_t l = 0; l < skeleton.layers.size(); ++l) {
    for (const std::string& name : projection_names()) {
      const std::string module = projection_module(static_cast<int64_t>(l), name);
      if (std::find(modules.begin(), modules.end(), module) == modules.end()) continue;
      model::Linear* linear = projection(skeleton.layers[l], name);
      const int64_t out = linear->weight.size(0), in = linear->weight.size(1);
      auto pair = std::make_unique<LoraPair>();
      pair->module = module;
      pair->layer = static_cast<int64_t>(l);
      // PEFT: nn.init.kaiming_uniform_(lora_A.weight, a=sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)).
      const double bound = 1.0 / std::sqrt(static_cast<double>(in));
      pair->a = at::empty({r, in}, at::kFloat).uniform_(-bound, bound, generator).to(device).requires_grad_(true);
      pair->b = at::zeros({out, r}, fp32).requires_grad_(true);
      pair->grad_a = at::zeros({r, in}, fp32);
      pair->grad_b = at::zeros({out, r}, fp32);
      pair->exp_avg_a = at::zeros({r, in}, fp32);
      pair->exp_avg_sq_a = at::zeros({r, in}, fp32);
      pair->exp_avg_b = at::zeros({out, r}, fp32);
      pair->exp_avg_sq_b = at::zeros({out, r}, fp32);
      const LoraPair* adapter = pair.get();
      const double scaling = scaling_;
      // PEFT's order: result + lora_B(lora_A(x)) * scaling, in the compute dtype.
      linear->forward_override = [adapter, scaling](const model::Linear& self, const at::Tensor& x) {
        const at::Tensor base = at::linear(x, self.weight, self.bias);
        const at::Tensor delta =
            at::linear(at::linear(x, adapter->a.to(x.scalar_type())), adapter->b.to(x.scalar_type()));
        return base + delta * scaling;
      };
      by_weight_[pair->module + ".weight"] = pair.get();
      pairs_.push_back(std::move(pair));
    }
  }
}

bool LoraAdapters::every_layer_alike() const {
  // Each (layer, projection) has at most one pair, so the count decides.
  return pairs_.size() == static_cast<size_t>(num_layers_) * target_names_.size();
}

const LoraPair* LoraAdapters::adapter_of(const std::string& weight_name) const {
  auto found = by_weight_.find(weight_name);
  return found == by_weight_.end() ? nullptr : found->second;
}

at::Tensor LoraAdapters::merged(const LoraPair& pair, const at::Tensor& base) const {
  at::NoGradGuard no_grad;
  return (base.to(at::kFloat) + at::matmul(pair.b, pair.a) * scaling_).to(base.scalar_type());
}

std::vector<at::Tensor> LoraAdapters::layer_leaves(int64_t layer) const {
  std::vector<at::Tensor> leaves;
  for (const auto& pair : pairs_) {
    if (pair->layer != layer) continue;
    leaves.push_back(pair->a);
    leaves.push_back(pair->b);
  }
  return leaves;
}

void LoraAdapters::add_grads(int64_t layer, const std::vector<at::Tensor>& grads, size_t first) {
  size_t i = first;
  for (auto& pair : pairs_) {
    if (pair->layer != layer) continue;
    if (grads.at(i).defined()) pair->grad_a.add_(grads[i]);
    if (grads.at(i + 1).defined()) pair->grad_b.add_(grads[i + 1]);
    i += 2;
  }
}

double LoraAdapters::reduce_grads(const DpComm& dp) {
  std::vector<at::Tensor> flat;
  for (const auto& pair : pairs_) {
    flat.push_back(pair->grad_a.reshape(-1));
    flat.push_back(pair->grad_b.reshape(-1));
  }
  at::Tensor all = at::cat(flat);
  if (dp.size() > 1) {
    dp.all_reduce_sum(all);
    all.div_(static_cast<double>(dp.size()));
    int64_t offset = 0;
    for (auto& pair : pairs_) {
      for (at::Tensor* g : {&pair->grad_a, &pair->grad_b}) {
        g->copy_(all.narrow(0, offset, g->numel()).view_as(*g));
        offset += g->numel();
      }
    }
  }
  return all.to(at::kDouble).square().sum().item<double>();
}

void LoraAdapters::zero_grads() {
  for (auto& pair : pairs_) {
    pair->grad_a.zero_();
    pair->grad_b.zero_();
  }
}

int64_t LoraAdapters::optimizer_bytes() const {
  int64_t bytes = 0;
  for (const auto& pair : pairs_) bytes += 2 * (pair->a.nbytes() + pair->b.nbytes());
  return bytes;
}

int64_t LoraAdapters::param_bytes() const {
  int64_t bytes = 0;
  for (const auto& pair : pairs_) bytes += pair->a.nbytes() + pair->b.nbytes();
  return bytes;
}

}  // namespace rlcore::train_fsdp
