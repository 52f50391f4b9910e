// Architecture: what one model family (an HF `model_type`) defines, in one file under
// libs/model/src/architectures/, and the registry that finds it by name.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rlcore/model/config.h"

namespace rlcore::model {

// How a sparse block weights its experts (SparseMoe::route): Qwen3-MoE casts
// the weights to the hidden dtype, Mixtral keeps them fp32, DeepSeek-V3 routes
// by sigmoid scores within its best groups and adds shared experts.
enum class MoeStyle { kQwen3Moe, kMixtral, kDeepseekV3 };

// Bias on the attention projections, as the HF modules build them.
enum class AttentionBias {
  kOptional,  // q/k/v and o_proj together, config.json's `attention_bias`
  kQkvOnly,   // always on q/k/v, never on o_proj (qwen2)
  kNone,      // never (mistral, mixtral)
};

// HF tensor names of a sparse block: "<block>.gate.weight", "<block>.experts.E.<gate_proj>.weight" ...
struct HfMoeNames {
  const char* block = "mlp";
  const char* gate_proj = "gate_proj";
  const char* up_proj = "up_proj";
  const char* down_proj = "down_proj";
};

// What the layers branch on. parse sets the matching ModelConfig fields from
// these, and validate refuses a config whose fields disagree with them.
struct LayerChoices {
  AttentionBias attention_bias = AttentionBias::kOptional;
  bool mlp_bias = false;           // config.json's `mlp_bias` is read (else no MLP bias)
  bool qk_norm = false;            // RMSNorm on each q and k head before RoPE
  bool sliding_window = false;     // config.json's `sliding_window` is read
  bool per_layer_sliding = false;  // `layer_types` says which layers slide
  // Gemma 2: (1 + w) RMSNorm weights, sandwich norms, scaled embeddings, soft-capping.
  bool gemma_norms = false;
  bool moe = false;  // sparse layers (num_experts > 0)
  MoeStyle moe_style = MoeStyle::kQwen3Moe;
  // Multi-head latent attention (DeepSeek-V3); its scale takes rope's mscale_all_dim.
  bool latent_attention = false;
};

struct Architecture {
  const char* model_type;  // config.json's `model_type`
  const char* hf_class;    // the HF classes' stem: "Qwen3" for Qwen3ForCausalLM, ...
  // Where the HF config classes' defaults differ between families.
  const char* head_dim_key = "head_dim";
  int64_t default_head_dim = 0;  // 0: hidden_size / num_attention_heads
  int64_t default_max_position_embeddings = 32768;
  bool default_tie_word_embeddings = false;
  const char* hidden_act_key = "hidden_act";
  LayerChoices layers;
  // Checkpoint names: the HF ones of a sparse block. Megatron's names are the
  // same for every family (megatron_layout.h); DeepSeek-V3 checkpoints also hold
  // multi-token-prediction layers after the last, which are skipped.
  HfMoeNames hf_moe_names;
  bool multi_token_prediction_layers = false;

  // The family's own config.json keys, read after the shared ones (nullptr: none).
  void (*parse)(const nlohmann::json& json, const std::string& source, ModelConfig& config) = nullptr;
  // The family's own checks, beyond the layer choices (nullptr: none).
  void (*validate)(const ModelConfig& config, const std::string& source) = nullptr;
  // The family's own config.json keys, written after the shared ones.
  void (*write)(const ModelConfig& config, nlohmann::json& json) = nullptr;
  // `rlcore model init` preset: the family's values over a sized config (nullptr: no preset).
  void (*preset)(ModelConfig& config) = nullptr;
};

// Every registered architecture, sorted by model_type.
const std::vector<Architecture>& architectures();
// nullptr for an unregistered model_type.
const Architecture* lookup_architecture(const std::string& model_type);
// Throws ConfigError naming model_type and listing the registered ones.
const Architecture& find_architecture(const std::string& model_type);
// The model_types of the architectures `keep` accepts: "a, b and c" (joined with ", " when `and_last` is false).
std::string architecture_names(bool (*keep)(const Architecture&) = nullptr, bool and_last = false);

}  // namespace rlcore::model
