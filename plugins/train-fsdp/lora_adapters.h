// LoRA adapters of the fsdp engine (verl's model.lora_rank / lora_alpha /
// target_modules / exclude_modules / lora_adapter_path, PEFT's semantics): each targeted projection computes
// W x + b + (alpha / r) B A x (alpha / sqrt(r) with use_rslora) with the base W frozen. The adapters are small,
// so every dp rank keeps all of them (replicated, fp32) with their gradient
// and AdamW state; gradients are averaged over dp with one all-reduce.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "dp_comm.h"
#include "rlcore/model/transformer.h"
#include "rlcore/options.h"

namespace rlcore::train_fsdp {

struct LoraOptions {
  int64_t lora_rank = 0;  // 0: LoRA off, the whole model trains
  double lora_alpha = 16;
  // "all-linear" (every projection of every decoder layer), module names (q_proj, v_proj, ...)
  // or regular expressions over full module names (lora_targets.h).
  std::vector<std::string> target_modules = {"all-linear"};
  std::vector<std::string> exclude_modules;  // taken out of what target_modules selects
  bool use_rslora = false;                   // PEFT's rank-stabilised scaling: lora_alpha / sqrt(r)
  // A PEFT adapter directory to start from; its adapter_config.json then gives
  // the rank, alpha and modules (lora_rank, when set, must agree).
  std::string lora_adapter_path;
};

OptionsSchema<LoraOptions> lora_options_schema();

class LoraAdapters;

// PEFT's on-disk adapter (what PeftModel.from_pretrained reads; verl's lora_adapter/):
// adapter_config.json and adapter_model.safetensors with keys
// "base_model.model.<module>.lora_A.weight" / ".lora_B.weight".
void write_peft_adapter(const std::string& dir, const LoraAdapters& adapters, const std::string& base_model);
// Copies a PEFT adapter written for the same rank and modules into `adapters`;
// throws FormatError naming the file and tensor when it holds other modules or shapes.
void read_peft_adapter(const std::string& dir, LoraAdapters& adapters);
// The rank, alpha and modules a PEFT adapter directory was written with; throws
// FormatError naming the field for PEFT features rlcore does not train (DoRA, rsLoRA, ...).
LoraOptions read_peft_adapter_options(const std::string& dir);
// The adapters `options` ask for; with lora_adapter_path set, those of that
// PEFT adapter with its weights (PEFT's from_pretrained, as verl does): its
// config gives rank, alpha and modules, and a lora_rank that disagrees is a ConfigError.
LoraAdapters make_lora_adapters(const LoraOptions& options, model::Transformer& skeleton, const at::Device& device,
                                uint64_t seed);

// One adapted projection: A [r, in] (kaiming-uniform, as PEFT) and B [out, r]
// (zeros, so the first forward is the base model's), with their training state.
struct LoraPair {
  std::string module;  // HF module name, e.g. "model.layers.0.self_attn.q_proj"
  int64_t layer = 0;
  at::Tensor a, b;
  at::Tensor grad_a, grad_b;
  at::Tensor exp_avg_a, exp_avg_b, exp_avg_sq_a, exp_avg_sq_b;
};

class LoraAdapters {
 public:
  LoraAdapters() = default;
  // Creates the adapters of the targeted projections of `skeleton` and installs
  // their forward on its Linears. Throws ConfigError naming the key on bad options.
  LoraAdapters(const LoraOptions& options, model::Transformer& skeleton, const at::Device& device, uint64_t seed);

  bool enabled() const { return !pairs_.empty(); }
  int64_t rank() const { return enabled() ? options_.lora_rank : 0; }  // 0 when off
  double scaling() const { return scaling_; }
  const LoraOptions& options() const { return options_; }
  // The projections that carry an adapter in some layer, in the model's order.
  const std::vector<std::string>& target_names() const { return target_names_; }
  // Whether every decoder layer adapts exactly target_names().
  bool every_layer_alike() const;
  std::vector<std::unique_ptr<LoraPair>>& pairs() { return pairs_; }
  const std::vector<std::unique_ptr<LoraPair>>& pairs() const { return pairs_; }
  // The adapter of the projection whose weight is `weight_name` (HF name), or null.
  const LoraPair* adapter_of(const std::string& weight_name) const;
  // base + (alpha / r) B A in base's dtype (summed in fp32): the weight the adapted projection computes with.
  at::Tensor merged(const LoraPair& pair, const at::Tensor& base) const;
  // The trainable tensors of decoder layer `layer` (a, b of each of its pairs, in order).
  std::vector<at::Tensor> layer_leaves(int64_t layer) const;
  // Adds grads[first + i] (the gradients of layer_leaves(layer)) to the pairs' gradients.
  void add_grads(int64_t layer, const std::vector<at::Tensor>& grads, size_t first);
  // Averages the gradients over dp and returns the squared global norm.
  double reduce_grads(const DpComm& dp);
  void zero_grads();
  int64_t optimizer_bytes() const;
  int64_t param_bytes() const;

 private:
  LoraOptions options_;
  double scaling_ = 0;
  int64_t num_layers_ = 0;
  std::vector<std::string> target_names_;
  std::map<std::string, const LoraPair*> by_weight_;
  std::vector<std::unique_ptr<LoraPair>> pairs_;  // stable addresses: the Linears' forwards point at them
};

}  // namespace rlcore::train_fsdp
