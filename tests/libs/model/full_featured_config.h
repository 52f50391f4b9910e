// A small model config with every optional tensor present (biases everywhere
// the architecture allows, qwen3's q/k norms, an untied head), for the layout tests.
#pragma once

#include <cstdint>
#include <string>

#include "rlcore/model/config.h"

namespace rlcore_test {

struct ConfigShape {
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t head_dim = 8;
  int64_t layers = 1;
};

inline rlcore::model::ModelConfig full_featured(const std::string& arch, const ConfigShape& shape = {}) {
  rlcore::model::ModelConfig c = rlcore::model::preset(arch, "tiny", 96);
  c.hidden_size = 32;
  c.num_attention_heads = shape.heads;
  c.num_key_value_heads = shape.kv_heads;
  c.head_dim = shape.head_dim;
  c.intermediate_size = 48;
  c.num_hidden_layers = shape.layers;
  c.qkv_bias = true;
  c.o_proj_bias = arch != "qwen2";
  c.mlp_bias = arch == "llama";
  c.tie_word_embeddings = false;
  c.validate("full-featured test config");
  return c;
}

}  // namespace rlcore_test
