// ModelConfig: the Hugging Face config.json of a Llama / Mistral / Mixtral / Qwen2 / Qwen3 / Qwen3-MoE / Gemma 2 /
// DeepSeek-V3 decoder, parsed and validated once, written back HF-compatibly, plus named size presets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>
#include <nlohmann/json_fwd.hpp>

namespace rlcore::model {

struct Architecture;  // architecture.h

// HF `rope_scaling` / `rope_parameters`: default, linear, llama3 and yarn;
// others (dynamic, longrope) are a ConfigError naming the field.
struct RopeScaling {
  std::string rope_type = "default";  // "default" | "linear" | "llama3" | "yarn"
  double factor = 1.0;
  // llama3 only.
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // llama3 and yarn; HF defaults it to max_position_embeddings.
  int64_t original_max_position_embeddings = 8192;
  // yarn only: the ramp between extrapolated and interpolated frequencies, and
  // the factor cos and sin are multiplied by (resolved from `factor`, `mscale`
  // and `mscale_all_dim` at parse time when the file does not give it).
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;
  double attention_factor = 1.0;
  // DeepSeek-V3 only (any rope_type but default): its attention scale is
  // multiplied by (0.1 * mscale_all_dim * ln(factor) + 1)^2; 0 = not given.
  double mscale_all_dim = 0.0;

  bool operator==(const RopeScaling& other) const;
};

struct ModelConfig {
  std::string model_type;  // a registered architecture (architecture.h)
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;  // deepseek_v3: qk_rope_head_dim, the rotary part of a query/key head (as HF sets it)
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double initializer_range = 0.02;
  bool tie_word_embeddings = false;
  // Bias on q/k/v (llama/qwen3: `attention_bias`; qwen2: always) and on o_proj
  // (llama/qwen3: `attention_bias`; qwen2: never), as the HF modules build them.
  bool qkv_bias = false;
  bool o_proj_bias = false;
  bool mlp_bias = false;  // llama `mlp_bias`
  // Qwen3 normalises q and k per head (RMSNorm over head_dim) before RoPE.
  bool qk_norm = false;
  // A mixture of experts (qwen3_moe, mixtral: every layer, experts of
  // intermediate_size, weights renormalised): layer i's MLP is a sparse block when
  // layer_is_sparse(i) (a router over num_experts experts of
  // moe_intermediate_size, each token sent to its num_experts_per_tok best),
  // else a dense Mlp of intermediate_size.
  int64_t num_experts = 0;  // 0: a dense model
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;  // the chosen experts' weights renormalised to sum to 1
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  double router_aux_loss_coef = 0.001;
  // DeepSeek-V3's routing (deepseek_v3; the defaults elsewhere): sigmoid
  // scores; the experts split into n_group groups of which each token searches
  // the topk_group best; weights times routed_scaling_factor; shared experts
  // (one MLP n_shared_experts * moe_intermediate_size wide) beside the routed
  // ones; the first first_k_dense_replace layers dense.
  int64_t n_shared_experts = 0;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  int64_t first_k_dense_replace = 0;
  // DeepSeek-V3's multi-head latent attention (kv_lora_rank > 0): queries from
  // q_proj, or low-rank through q_a_proj -> q_a_layernorm -> q_b_proj when
  // q_lora_rank is set; keys and values decompressed from one latent of
  // kv_lora_rank (kv_a_proj_with_mqa -> kv_a_layernorm -> kv_b_proj), each
  // key head qk_nope_head_dim + head_dim wide (its rotary part shared by all
  // heads), each value head v_head_dim wide.
  int64_t kv_lora_rank = 0;
  std::optional<int64_t> q_lora_rank;
  int64_t qk_nope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool rope_interleave = false;  // rotary pairs (x0, x1), (x2, x3), ... rather than the two halves
  // A sliding layer's query sees only the keys of the last `sliding_window`
  // positions (itself included): every layer for mistral, the layers that
  // `sliding_layers` marks for gemma2. Unset: full causal attention.
  std::optional<int64_t> sliding_window;
  std::vector<bool> sliding_layers;  // per layer; empty = all (with a window)

  // Gemma 2's differences from Llama (defaults elsewhere):
  std::string hidden_act = "silu";                // the MLP's activation: silu | gelu_pytorch_tanh
  bool norm_weight_offset = false;                // RMSNorm scales by (1 + weight), in fp32
  bool sandwich_norms = false;                    // norms also after attention and around the MLP
  bool scale_embeddings = false;                  // embeddings times sqrt(hidden_size)
  std::optional<double> query_pre_attn_scalar;    // attention scale this^-0.5 (else head_dim^-0.5)
  std::optional<double> attn_logit_softcapping;   // scores -> tanh(scores / cap) * cap
  std::optional<double> final_logit_softcapping;  // logits -> tanh(logits / cap) * cap
  std::string torch_dtype = "float32";
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // HF allows an int or a list
  std::optional<int64_t> pad_token_id;

  // Parses config.json text; `source` names the file in error messages.
  // Throws ConfigError naming the field and source for a missing, mistyped,
  // out-of-range or inconsistent field, or an unsupported model_type/feature.
  static ModelConfig from_json(const nlohmann::json& json, const std::string& source = "config.json");
  static ModelConfig from_json_text(const std::string& text, const std::string& source = "config.json");
  // Throws IoError if the file cannot be read.
  static ModelConfig from_file(const std::string& path);
  // The config.json of the Hugging Face checkpoint directory `model_path` (an
  // engine's ComponentContext::model_path). An empty model_path, or one that is
  // not a directory, is a ConfigError that starts with `component` (the engine
  // asking, "fsdp") and names model_path; from_file's errors pass through.
  static ModelConfig from_checkpoint_dir(const std::string& model_path, const std::string& component);

  // HF-compatible config.json (architectures, model_type and every field the
  // HF config class reads), loadable by transformers' AutoConfig.
  nlohmann::json to_json() const;
  std::string to_json_text() const;  // 2-space indented, like save_pretrained

  // Throws ConfigError naming the first inconsistent field.
  void validate(const std::string& source = "config") const;

  int64_t num_kv_groups() const { return num_attention_heads / num_key_value_heads; }
  bool is_moe() const { return num_experts > 0; }
  bool latent_attention() const { return kv_lora_rank > 0; }
  // A query/key head's width: head_dim, plus qk_nope_head_dim with latent attention.
  int64_t qk_head_dim() const { return qk_nope_head_dim + head_dim; }
  // A value head's width: head_dim, or v_head_dim with latent attention.
  int64_t value_head_dim() const { return latent_attention() ? v_head_dim : head_dim; }
  bool layer_is_sparse(int64_t layer) const;
  bool layer_slides(int64_t layer) const {
    return sliding_window.has_value() && (sliding_layers.empty() || sliding_layers.at(layer));
  }
  // head_dim^-0.5, or query_pre_attn_scalar^-0.5 when set; deepseek_v3:
  // qk_head_dim^-0.5, times yarn's mscale(mscale_all_dim)^2 when rope_scaling gives it.
  double attention_scaling() const;
  // torch_dtype as a ScalarType (float32 / bfloat16 / float16).
  c10::ScalarType dtype() const;

  // The registered architecture of model_type; throws ConfigError for an unknown one.
  const Architecture& architecture() const;

  bool operator==(const ModelConfig& other) const;
  bool operator!=(const ModelConfig& other) const { return !(*this == other); }
};

// model_type names a registered architecture.
bool is_supported_model_type(const std::string& model_type);

// Named presets for `rlcore model init --arch ARCH --size SIZE`: arch is an
// architecture with a preset (llama, qwen2, qwen3, qwen3_moe, deepseek_v3), size is tiny (~1M params with a 1k vocab),
// 100m (~100M with a 32k vocab) or 1b (~1B with a 32k vocab, Llama-3.2-1B shaped). Embeddings are tied, as in the small
// Llama 3.2 / Qwen models. Throws ConfigError for an unknown arch or size.
ModelConfig preset(const std::string& arch, const std::string& size, int64_t vocab_size);

}  // namespace rlcore::model
