// Llama (LlamaConfig): the plain pre-norm decoder the other families vary.
#include <nlohmann/json.hpp>

#include "architectures.h"

namespace rlcore::model {
namespace {

void write_llama(const ModelConfig& c, nlohmann::json& j) {
  j["attention_bias"] = c.qkv_bias;
  j["mlp_bias"] = c.mlp_bias;
  j["pretraining_tp"] = 1;
}

void set_llama_preset(ModelConfig& c) {  // Llama 3's values
  c.rope_theta = 500000.0;
  c.rms_norm_eps = 1e-5;
}

}  // namespace

Architecture llama_architecture() {
  Architecture a{"llama", "Llama"};
  a.default_max_position_embeddings = 2048;
  a.layers.mlp_bias = true;
  a.write = write_llama;
  a.preset = set_llama_preset;
  return a;
}

}  // namespace rlcore::model
