// Qwen3 (Qwen3Config): Qwen2 with q/k norms per head, `attention_bias`, and head_dim 128 by default.
#include <nlohmann/json.hpp>

#include "architectures.h"

namespace rlcore::model {

void write_qwen3_keys(const ModelConfig& c, nlohmann::json& j) {
  j["attention_bias"] = c.qkv_bias;
  write_qwen2_keys(c, j);
}

Architecture qwen3_architecture() {
  Architecture a = qwen2_architecture();
  a.model_type = "qwen3";
  a.hf_class = "Qwen3";
  a.default_head_dim = 128;
  a.layers.attention_bias = AttentionBias::kOptional;
  a.layers.qk_norm = true;
  a.write = write_qwen3_keys;
  return a;
}

}  // namespace rlcore::model
