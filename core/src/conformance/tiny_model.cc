// The conformance suite's tiny models and tensor comparisons.
#include "conformance/tiny_model.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "rlcore/core/checkpoint_init.h"

namespace rlcore::conformance {

model::ModelConfig tiny_model_config() {
  model::ModelConfig config = model::preset("llama", "tiny", 320);
  config.hidden_size = 32;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.head_dim = 8;
  config.intermediate_size = 64;
  config.num_hidden_layers = 2;
  config.max_position_embeddings = 64;
  config.initializer_range = 0.1;
  config.eos_token_ids = {319};
  config.pad_token_id.reset();
  config.validate("conformance tiny model");
  return config;
}

model::NamedTensors tiny_model_weights(uint64_t seed) {
  model::Transformer transformer(tiny_model_config(), model::ModelHead::kCausalLm,
                                 at::TensorOptions().dtype(at::kFloat));
  transformer.init_random(seed);
  return transformer.named_parameters();
}

void write_tiny_model(const std::filesystem::path& dir, uint64_t seed) {
  write_hf_checkpoint(dir, tiny_model_config(), tiny_model_weights(seed), builtin_tokenizer_files());
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || a.sizes() != b.sizes()) return std::numeric_limits<double>::infinity();
  if (a.numel() == 0) return 0;
  const at::Tensor diff = (a.detach().to(at::kCPU, at::kDouble) - b.detach().to(at::kCPU, at::kDouble)).abs();
  // A NaN on either side is a difference, not something max() may skip.
  if (diff.isnan().any().item<bool>()) return std::numeric_limits<double>::quiet_NaN();
  return diff.max().item<double>();
}

bool bit_equal(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const at::Tensor x = a.detach().to(at::kCPU).contiguous();
  const at::Tensor y = b.detach().to(at::kCPU).contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

void Worst::add(const std::string& name, double value) {
  if (std::isnan(error)) return;  // a NaN stays the worst
  if (std::isnan(value) || value > error || what.empty()) {
    error = value;
    what = name;
  }
}

std::string compare_named(const model::NamedTensors& candidate, const model::NamedTensors& expected, Worst& worst) {
  std::map<std::string, at::Tensor> by_name(candidate.begin(), candidate.end());
  for (const auto& [name, tensor] : expected) {
    auto it = by_name.find(name);
    if (it == by_name.end()) return "tensor '" + name + "' is missing";
    if (it->second.sizes() != tensor.sizes()) {
      return "tensor '" + name + "' has shape " + c10::str(it->second.sizes()) + ", expected " +
             c10::str(tensor.sizes());
    }
    worst.add(name, max_abs_diff(it->second, tensor));
    by_name.erase(it);
  }
  if (!by_name.empty()) return "unexpected tensor '" + by_name.begin()->first + "'";
  return "";
}

}  // namespace rlcore::conformance
