// Qwen2 (Qwen2Config): Llama with a bias on q/k/v (never on o_proj).
#include <nlohmann/json.hpp>

#include "architectures.h"

namespace rlcore::model {

void write_qwen2_keys(const ModelConfig& c, nlohmann::json& j) {
  j["use_sliding_window"] = false;
  j["sliding_window"] = nullptr;
  j["max_window_layers"] = c.num_hidden_layers;
}

void set_qwen_preset(ModelConfig& c) {
  c.rope_theta = 1000000.0;
  c.rms_norm_eps = 1e-6;
}

Architecture qwen2_architecture() {
  Architecture a{"qwen2", "Qwen2"};
  a.layers.attention_bias = AttentionBias::kQkvOnly;
  a.write = write_qwen2_keys;
  a.preset = set_qwen_preset;
  return a;
}

}  // namespace rlcore::model
