// Gemma 2 (Gemma2Config's defaults): sandwich norms with (1 + w) weights,
// scaled embeddings, GELU-tanh, soft-capped scores and logits, and sliding
// windows on alternate layers (`layer_types`).
#include <cmath>

#include <nlohmann/json.hpp>

#include "../config_json.h"
#include "architectures.h"

namespace rlcore::model {
namespace {

using namespace config_json;

void parse_gemma2(const json& j, const std::string& source, ModelConfig& c) {
  c.hidden_act = get_string(j, "hidden_activation", source, get_string(j, "hidden_act", source, "gelu_pytorch_tanh"));
  c.query_pre_attn_scalar = get_double(j, "query_pre_attn_scalar", source, 256.0);
  c.attn_logit_softcapping = get_nullable_double(j, "attn_logit_softcapping", source, 50.0);
  c.final_logit_softcapping = get_nullable_double(j, "final_logit_softcapping", source, 30.0);
  if (const std::optional<double> window = get_nullable_double(j, "sliding_window", source, 4096.0)) {
    c.sliding_window = static_cast<int64_t>(*window);
  }
  if (get_bool(j, "use_bidirectional_attention", source, false)) {
    fail(source, "use_bidirectional_attention", "true is not supported (rlcore's decoders are causal)");
  }
  const json* layer_types = find(j, "layer_types");
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (layer_types == nullptr) {
      c.sliding_layers.push_back((i + 1) % 2 != 0);  // HF: even layers slide
      continue;
    }
    if (!layer_types->is_array() || static_cast<int64_t>(layer_types->size()) != c.num_hidden_layers) {
      fail(source, "layer_types", "must list one type per layer (" + std::to_string(c.num_hidden_layers) + ")");
    }
    const json& type = (*layer_types)[static_cast<size_t>(i)];
    if (type != "sliding_attention" && type != "full_attention") {
      fail(source, "layer_types", "entry " + type.dump() + " is not supported (sliding_attention, full_attention)");
    }
    c.sliding_layers.push_back(type == "sliding_attention");
  }
}

void write_gemma2(const ModelConfig& c, json& j) {
  j["attention_bias"] = c.qkv_bias;
  j["sliding_window"] = c.sliding_window ? json(*c.sliding_window) : json(nullptr);
  json layer_types = json::array();
  for (bool slides : c.sliding_layers) layer_types.push_back(slides ? "sliding_attention" : "full_attention");
  j["layer_types"] = layer_types;
  // Gemma2Config types it int: written so when whole, as HF writes it.
  const double scalar = c.query_pre_attn_scalar.value_or(static_cast<double>(c.head_dim));
  j["query_pre_attn_scalar"] = scalar == std::floor(scalar) ? json(static_cast<int64_t>(scalar)) : json(scalar);
  j["attn_logit_softcapping"] = c.attn_logit_softcapping ? json(*c.attn_logit_softcapping) : json(nullptr);
  j["final_logit_softcapping"] = c.final_logit_softcapping ? json(*c.final_logit_softcapping) : json(nullptr);
}

}  // namespace

Architecture gemma2_architecture() {
  Architecture a{"gemma2", "Gemma2"};
  a.default_head_dim = 256;
  a.default_max_position_embeddings = 8192;
  a.default_tie_word_embeddings = true;
  a.hidden_act_key = "hidden_activation";
  a.layers.sliding_window = true;
  a.layers.per_layer_sliding = true;
  a.layers.gemma_norms = true;
  a.parse = parse_gemma2;
  a.write = write_gemma2;
  return a;
}

}  // namespace rlcore::model
