// ModelConfig <-> HF config.json. Defaults follow the HF config classes
// (LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, DeepseekV3Config, ...) so a file HF accepts
// parses the same.
#include "rlcore/model/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"

namespace rlcore::model {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& field, const std::string& what) {
  throw ConfigError(source + ": field '" + field + "' " + what);
}

// HF writes null for "use the default", so null counts as absent.
const json* find(const json& object, const std::string& key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

int64_t get_int(const json& object, const std::string& key, const std::string& source,
                std::optional<int64_t> fallback = std::nullopt) {
  const json* value = find(object, key);
  if (value == nullptr) {
    if (fallback) return *fallback;
    fail(source, key, "is required but missing");
  }
  if (!value->is_number_integer()) fail(source, key, "must be an integer, got " + value->dump());
  return value->get<int64_t>();
}

double get_double(const json& object, const std::string& key, const std::string& source, double fallback) {
  const json* value = find(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_number()) fail(source, key, "must be a number, got " + value->dump());
  return value->get<double>();
}

bool get_bool(const json& object, const std::string& key, const std::string& source, bool fallback) {
  const json* value = find(object, key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) fail(source, key, "must be true or false, got " + value->dump());
  return value->get<bool>();
}

std::string get_string(const json& object, const std::string& key, const std::string& source,
                       std::optional<std::string> fallback = std::nullopt) {
  const json* value = find(object, key);
  if (value == nullptr) {
    if (fallback) return *fallback;
    fail(source, key, "is required but missing");
  }
  if (!value->is_string()) fail(source, key, "must be a string, got " + value->dump());
  return value->get<std::string>();
}

std::optional<int64_t> get_optional_int(const json& object, const std::string& key, const std::string& source) {
  if (find(object, key) == nullptr) return std::nullopt;
  return get_int(object, key, source);
}

// HF config fields whose null means "off" while absence means the class
// default (MistralConfig.sliding_window, Gemma2Config's softcapping).
std::optional<double> get_nullable_double(const json& object, const std::string& key, const std::string& source,
                                          std::optional<double> absent) {
  const auto it = object.find(key);
  if (it == object.end()) return absent;
  if (it->is_null()) return std::nullopt;
  return get_double(object, key, source, 0.0);
}

std::vector<int64_t> get_int_list(const json& object, const std::string& key, const std::string& source) {
  const json* value = find(object, key);
  if (value == nullptr) return {};
  if (value->is_number_integer()) return {value->get<int64_t>()};
  std::vector<int64_t> out;
  if (!value->is_array()) fail(source, key, "must be an integer or a list of integers");
  for (const json& item : *value) {
    if (!item.is_number_integer()) fail(source, key, "must be an integer or a list of integers");
    out.push_back(item.get<int64_t>());
  }
  return out;
}

// HF's yarn attention factor when the file leaves it out: 0.1 * mscale * ln(factor) + 1
// (1 for factor <= 1), as a ratio when both mscale and mscale_all_dim are given.
double yarn_attention_factor(double factor, double mscale, double mscale_all_dim) {
  const auto get_mscale = [factor](double scale) { return factor <= 1 ? 1.0 : 0.1 * scale * std::log(factor) + 1.0; };
  if (mscale != 0 && mscale_all_dim != 0) return get_mscale(mscale) / get_mscale(mscale_all_dim);
  return get_mscale(1.0);
}

// transformers <= 4.5x: `rope_theta` + `rope_scaling`; newer: `rope_parameters`
// holding both. Either spelling of the type key ("rope_type", older "type").
void parse_rope(const json& j, const std::string& source, ModelConfig& c) {
  c.rope_theta = get_double(j, "rope_theta", source, 10000.0);
  const json* scaling = find(j, "rope_parameters");
  std::string field = "rope_parameters";
  if (scaling == nullptr) {
    scaling = find(j, "rope_scaling");
    field = "rope_scaling";
  }
  if (scaling == nullptr) return;
  if (!scaling->is_object()) fail(source, field, "must be an object or null");
  const std::string where = source + " (" + field + ")";
  c.rope_theta = get_double(*scaling, "rope_theta", where, c.rope_theta);
  RopeScaling& r = c.rope_scaling;
  r.rope_type = get_string(*scaling, "rope_type", where, get_string(*scaling, "type", where, "default"));
  if (r.rope_type == "default") return;
  if (r.rope_type != "linear" && r.rope_type != "llama3" && r.rope_type != "yarn") {
    fail(source, field + ".rope_type",
         "'" + r.rope_type + "' is not supported (supported: default, linear, llama3, yarn)");
  }
  r.original_max_position_embeddings =
      get_int(*scaling, "original_max_position_embeddings", where,
              get_int(j, "original_max_position_embeddings", source, c.max_position_embeddings));
  // yarn without a factor (DeepSeek-V3 style) stretches to max_position_embeddings.
  const double implied_factor =
      static_cast<double>(c.max_position_embeddings) / static_cast<double>(r.original_max_position_embeddings);
  r.factor = get_double(*scaling, "factor", where, r.rope_type == "yarn" ? implied_factor : 1.0);
  if (r.rope_type == "llama3") {
    r.low_freq_factor = get_double(*scaling, "low_freq_factor", where, 1.0);
    r.high_freq_factor = get_double(*scaling, "high_freq_factor", where, 4.0);
  } else if (r.rope_type == "yarn") {
    // HF reads these with `or`: null and 0 both mean the default.
    r.beta_fast = get_double(*scaling, "beta_fast", where, 0.0);
    r.beta_slow = get_double(*scaling, "beta_slow", where, 0.0);
    if (r.beta_fast == 0) r.beta_fast = 32.0;
    if (r.beta_slow == 0) r.beta_slow = 1.0;
    r.truncate = get_bool(*scaling, "truncate", where, true);
    r.attention_factor = get_double(*scaling, "attention_factor", where,
                                    yarn_attention_factor(r.factor, get_double(*scaling, "mscale", where, 0.0),
                                                          get_double(*scaling, "mscale_all_dim", where, 0.0)));
  }
  if (c.model_type == "deepseek_v3") r.mscale_all_dim = get_double(*scaling, "mscale_all_dim", where, 0.0);
}

// `architectures` names the HF class; a decoder rlcore does not build (MoE,
// vision-language, ...) is refused by that name before anything else is read.
void check_architectures(const json& j, const std::string& source) {
  const json* architectures = find(j, "architectures");
  if (architectures == nullptr) return;
  if (!architectures->is_array()) fail(source, "architectures", "must be a list of class names");
  static const std::vector<std::string> kBodies = {"DeepseekV3", "Gemma2", "Llama", "Mistral",
                                                   "Mixtral",    "Qwen2",  "Qwen3", "Qwen3Moe"};
  static const std::vector<std::string> kHeads = {"ForCausalLM", "ForTokenClassification", "ForSequenceClassification"};
  for (const json& name : *architectures) {
    if (!name.is_string()) fail(source, "architectures", "must be a list of class names, got " + name.dump());
    const std::string text = name.get<std::string>();
    const bool known = std::any_of(kBodies.begin(), kBodies.end(), [&](const std::string& body) {
      return std::any_of(kHeads.begin(), kHeads.end(), [&](const std::string& head) { return text == body + head; });
    });
    if (!known) {
      fail(source, "architectures",
           "'" + text +
               "' is not supported: rlcore builds DeepseekV3, Gemma2, Llama, Mistral, Mixtral, Qwen2, Qwen3 and "
               "Qwen3Moe " +
               "*ForCausalLM, *ForTokenClassification, *ForSequenceClassification; other mixtures of experts and " +
               "vision models are not");
    }
  }
}

// Gemma 2 (Gemma2Config's defaults): sandwich norms with (1 + w) weights,
// scaled embeddings, GELU-tanh, soft-capped scores and logits, and sliding
// windows on alternate layers (`layer_types`).
void parse_gemma2(const json& j, const std::string& source, ModelConfig& c) {
  c.norm_weight_offset = c.sandwich_norms = c.scale_embeddings = true;
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

// DeepSeek-V3 (DeepseekV3Config's defaults): latent attention, group-limited
// sigmoid routing with shared experts, dense first layers. What the original
// DeepSeek configs say that HF does not implement either is refused by name.
void parse_deepseek_v3(const json& j, const std::string& source, ModelConfig& c) {
  c.head_dim = get_int(j, "qk_rope_head_dim", source, 64);  // HF: head_dim = qk_rope_head_dim
  // A head_dim given beside it would size HF's rotary embedding instead (and fail there).
  if (find(j, "head_dim") != nullptr && get_int(j, "head_dim", source) != c.head_dim) {
    fail(source, "head_dim", "must equal qk_rope_head_dim (" + std::to_string(c.head_dim) + ") for deepseek_v3");
  }
  c.qk_nope_head_dim = get_int(j, "qk_nope_head_dim", source, 128);
  c.v_head_dim = get_int(j, "v_head_dim", source, 128);
  c.kv_lora_rank = get_int(j, "kv_lora_rank", source, 512);
  const auto q_lora_rank = j.find("q_lora_rank");  // null: a plain q_proj
  if (q_lora_rank == j.end()) {
    c.q_lora_rank = 1536;
  } else if (!q_lora_rank->is_null()) {
    c.q_lora_rank = get_int(j, "q_lora_rank", source);
  }
  c.rope_interleave = get_bool(j, "rope_interleave", source, true);
  c.num_experts = find(j, "n_routed_experts") != nullptr ? get_int(j, "n_routed_experts", source)
                                                         : get_int(j, "num_local_experts", source, 256);
  c.n_shared_experts = get_int(j, "n_shared_experts", source, 1);
  c.num_experts_per_tok = get_int(j, "num_experts_per_tok", source, 8);
  c.moe_intermediate_size = get_int(j, "moe_intermediate_size", source, 2048);
  c.n_group = get_int(j, "n_group", source, 8);
  c.topk_group = get_int(j, "topk_group", source, 4);
  c.routed_scaling_factor = get_double(j, "routed_scaling_factor", source, 2.5);
  c.norm_topk_prob = get_bool(j, "norm_topk_prob", source, true);
  c.first_k_dense_replace = get_int(j, "first_k_dense_replace", source, 3);
  c.router_aux_loss_coef = 0.0;  // balanced by e_score_correction_bias, not by a loss
  if (get_string(j, "scoring_func", source, "sigmoid") != "sigmoid") {
    fail(source, "scoring_func", "'" + get_string(j, "scoring_func", source) + "' is not supported (sigmoid)");
  }
  if (get_string(j, "topk_method", source, "noaux_tc") != "noaux_tc") {
    fail(source, "topk_method", "'" + get_string(j, "topk_method", source) + "' is not supported (noaux_tc)");
  }
  if (get_int(j, "moe_layer_freq", source, 1) != 1) {
    fail(source, "moe_layer_freq",
         "other than 1 is not supported (every layer from first_k_dense_replace on is sparse)");
  }
  if (find(j, "quantization_config") != nullptr) {
    fail(source, "quantization_config",
         "is not supported: rlcore reads unquantized weights (convert an fp8 checkpoint to bfloat16 first)");
  }
}

void check_positive(const std::string& source, const std::string& field, double value) {
  if (!(value > 0)) {
    std::ostringstream text;
    text << "must be positive, got " << value;
    fail(source, field, text.str());
  }
}

// What DeepSeek-V3's modules need of their sizes (HF's would fail or build another model).
void validate_deepseek_v3(const ModelConfig& c, const std::string& source) {
  const auto text = [](int64_t value) { return std::to_string(value); };
  check_positive(source, "kv_lora_rank", static_cast<double>(c.kv_lora_rank));
  if (c.q_lora_rank) check_positive(source, "q_lora_rank", static_cast<double>(*c.q_lora_rank));
  check_positive(source, "qk_nope_head_dim", static_cast<double>(c.qk_nope_head_dim));
  check_positive(source, "v_head_dim", static_cast<double>(c.v_head_dim));
  // kv_b_proj makes one key and value head per query head: there is nothing to group.
  if (c.num_key_value_heads != c.num_attention_heads) {
    fail(source, "num_key_value_heads",
         "(" + text(c.num_key_value_heads) + ") must equal num_attention_heads (" + text(c.num_attention_heads) +
             ") for deepseek_v3's latent attention");
  }
  check_positive(source, "n_shared_experts", static_cast<double>(c.n_shared_experts));
  check_positive(source, "n_group", static_cast<double>(c.n_group));
  if (c.num_experts % c.n_group != 0 || c.num_experts / c.n_group < 2) {
    fail(source, "n_group",
         "(" + text(c.n_group) + ") must divide n_routed_experts (" + text(c.num_experts) +
             ") into groups of at least 2 (a group scores by its best two)");
  }
  if (c.topk_group < 1 || c.topk_group > c.n_group) {
    fail(source, "topk_group", "(" + text(c.topk_group) + ") must be between 1 and n_group (" + text(c.n_group) + ")");
  }
  if (c.num_experts_per_tok > c.topk_group * (c.num_experts / c.n_group)) {
    fail(source, "num_experts_per_tok",
         "(" + text(c.num_experts_per_tok) + ") exceeds the experts of topk_group groups (" +
             text(c.topk_group * (c.num_experts / c.n_group)) + ")");
  }
  check_positive(source, "routed_scaling_factor", c.routed_scaling_factor);
  if (c.first_k_dense_replace < 0 || c.first_k_dense_replace > c.num_hidden_layers) {
    fail(source, "first_k_dense_replace",
         "(" + text(c.first_k_dense_replace) + ") must be between 0 and num_hidden_layers (" +
             text(c.num_hidden_layers) + ")");
  }
  if (c.decoder_sparse_step != 1 || !c.mlp_only_layers.empty()) {
    fail(source, "first_k_dense_replace", "alone says which deepseek_v3 layers are dense");
  }
  if (c.hidden_act != "silu") fail(source, "hidden_act", "must be silu for deepseek_v3");
  if (c.router_aux_loss_coef != 0.0) fail(source, "router_aux_loss_coef", "must be 0 for deepseek_v3");
}

}  // namespace

bool RopeScaling::operator==(const RopeScaling& o) const {
  return std::tie(rope_type, factor, low_freq_factor, high_freq_factor, original_max_position_embeddings, beta_fast,
                  beta_slow, truncate, attention_factor, mscale_all_dim) ==
         std::tie(o.rope_type, o.factor, o.low_freq_factor, o.high_freq_factor, o.original_max_position_embeddings,
                  o.beta_fast, o.beta_slow, o.truncate, o.attention_factor, o.mscale_all_dim);
}

bool ModelConfig::operator==(const ModelConfig& o) const {
  return std::tie(model_type, vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
                  num_key_value_heads, head_dim, max_position_embeddings, rms_norm_eps, rope_theta, rope_scaling,
                  initializer_range, tie_word_embeddings, qkv_bias, o_proj_bias, mlp_bias, qk_norm, sliding_window,
                  sliding_layers, hidden_act, norm_weight_offset, sandwich_norms, scale_embeddings,
                  query_pre_attn_scalar, attn_logit_softcapping, final_logit_softcapping, torch_dtype, bos_token_id,
                  eos_token_ids, pad_token_id, num_experts, num_experts_per_tok, moe_intermediate_size, norm_topk_prob,
                  decoder_sparse_step, mlp_only_layers, router_aux_loss_coef, n_shared_experts, n_group, topk_group,
                  routed_scaling_factor, first_k_dense_replace, kv_lora_rank, q_lora_rank, qk_nope_head_dim, v_head_dim,
                  rope_interleave) ==
         std::tie(o.model_type, o.vocab_size, o.hidden_size, o.intermediate_size, o.num_hidden_layers,
                  o.num_attention_heads, o.num_key_value_heads, o.head_dim, o.max_position_embeddings, o.rms_norm_eps,
                  o.rope_theta, o.rope_scaling, o.initializer_range, o.tie_word_embeddings, o.qkv_bias, o.o_proj_bias,
                  o.mlp_bias, o.qk_norm, o.sliding_window, o.sliding_layers, o.hidden_act, o.norm_weight_offset,
                  o.sandwich_norms, o.scale_embeddings, o.query_pre_attn_scalar, o.attn_logit_softcapping,
                  o.final_logit_softcapping, o.torch_dtype, o.bos_token_id, o.eos_token_ids, o.pad_token_id,
                  o.num_experts, o.num_experts_per_tok, o.moe_intermediate_size, o.norm_topk_prob,
                  o.decoder_sparse_step, o.mlp_only_layers, o.router_aux_loss_coef, o.n_shared_experts, o.n_group,
                  o.topk_group, o.routed_scaling_factor, o.first_k_dense_replace, o.kv_lora_rank, o.q_lora_rank,
                  o.qk_nope_head_dim, o.v_head_dim, o.rope_interleave);
}

ModelConfig ModelConfig::from_json(const json& j, const std::string& source) {
  if (!j.is_object()) throw ConfigError(source + ": expected a JSON object");
  check_architectures(j, source);
  ModelConfig c;
  c.model_type = get_string(j, "model_type", source);
  if (!is_supported_model_type(c.model_type)) {
    fail(source, "model_type", "'" + c.model_type + "' is not supported (supported: " + kSupportedModelTypes + ")");
  }
  const bool is_llama = c.model_type == "llama";
  const bool is_mixtral = c.model_type == "mixtral";
  const bool is_mistral = c.model_type == "mistral" || is_mixtral;  // the same attention
  const bool is_gemma2 = c.model_type == "gemma2";
  const bool is_qwen2 = c.model_type == "qwen2";
  const bool is_qwen3_moe = c.model_type == "qwen3_moe";
  const bool is_qwen3 = c.model_type == "qwen3" || is_qwen3_moe;  // the same attention
  const bool is_deepseek_v3 = c.model_type == "deepseek_v3";

  c.vocab_size = get_int(j, "vocab_size", source);
  c.hidden_size = get_int(j, "hidden_size", source);
  c.intermediate_size = get_int(j, "intermediate_size", source);
  c.num_hidden_layers = get_int(j, "num_hidden_layers", source);
  c.num_attention_heads = get_int(j, "num_attention_heads", source);
  c.num_key_value_heads = get_int(j, "num_key_value_heads", source, c.num_attention_heads);
  if (is_deepseek_v3) {
    c.head_dim = 0;  // parse_deepseek_v3: qk_rope_head_dim, whatever head_dim the file has
  } else if (find(j, "head_dim") != nullptr) {
    c.head_dim = get_int(j, "head_dim", source);
  } else if (is_qwen3 || is_gemma2) {
    c.head_dim = is_qwen3 ? 128 : 256;  // the config classes' defaults, not hidden/heads
  } else {
    check_positive(source, "num_attention_heads", static_cast<double>(c.num_attention_heads));
    if (c.hidden_size % c.num_attention_heads != 0) {
      fail(source, "hidden_size",
           "(" + std::to_string(c.hidden_size) + ") must be divisible by num_attention_heads (" +
               std::to_string(c.num_attention_heads) + ") when head_dim is absent");
    }
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  const int64_t default_max_positions = is_llama         ? 2048
                                        : is_deepseek_v3 ? 4096
                                        : is_mistral     ? 4096 * 32
                                        : is_gemma2      ? 8192
                                                         : 32768;
  c.max_position_embeddings = get_int(j, "max_position_embeddings", source, default_max_positions);
  c.rms_norm_eps = get_double(j, "rms_norm_eps", source, 1e-6);
  c.initializer_range = get_double(j, "initializer_range", source, 0.02);
  c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", source, is_gemma2);
  parse_rope(j, source, c);

  c.hidden_act = get_string(j, "hidden_act", source, "silu");
  if (is_gemma2) {
    parse_gemma2(j, source, c);
  } else if (is_mistral) {
    // MistralConfig: absent means its default 4096 (MixtralConfig: none), null means none.
    const auto window = j.find("sliding_window");
    if (window == j.end()) {
      if (!is_mixtral) c.sliding_window = 4096;
    } else if (!window->is_null()) {
      c.sliding_window = get_int(j, "sliding_window", source);
    }
  } else if (get_bool(j, "use_sliding_window", source, false)) {
    fail(source, "use_sliding_window", "true is not supported for " + c.model_type + " (mistral's sliding_window is)");
  }
  if (is_qwen2) {
    c.qkv_bias = true;
    c.o_proj_bias = false;
  } else if (!is_mistral) {
    c.qkv_bias = c.o_proj_bias = get_bool(j, "attention_bias", source, false);
  }
  c.mlp_bias = is_llama && get_bool(j, "mlp_bias", source, false);
  c.qk_norm = is_qwen3;
  if (is_qwen3_moe) {  // Qwen3MoeConfig's defaults
    // The Hub's configs say num_experts; transformers >= 5 writes num_local_experts.
    c.num_experts = find(j, "num_local_experts") != nullptr ? get_int(j, "num_local_experts", source)
                                                            : get_int(j, "num_experts", source, 128);
    c.num_experts_per_tok = get_int(j, "num_experts_per_tok", source, 8);
    c.moe_intermediate_size = get_int(j, "moe_intermediate_size", source, 768);
    c.norm_topk_prob = get_bool(j, "norm_topk_prob", source, false);
    c.decoder_sparse_step = get_int(j, "decoder_sparse_step", source, 1);
    if (find(j, "mlp_only_layers") != nullptr) c.mlp_only_layers = get_int_list(j, "mlp_only_layers", source);
    c.router_aux_loss_coef = get_double(j, "router_aux_loss_coef", source, 0.001);
  } else if (is_deepseek_v3) {
    parse_deepseek_v3(j, source, c);
  } else if (is_mixtral) {  // MixtralConfig's defaults: every layer sparse, experts of intermediate_size
    c.num_experts = get_int(j, "num_local_experts", source, 8);
    c.num_experts_per_tok = get_int(j, "num_experts_per_tok", source, 2);
    c.moe_intermediate_size = c.intermediate_size;
    c.norm_topk_prob = true;
    c.router_aux_loss_coef = get_double(j, "router_aux_loss_coef", source, 0.001);
    if (get_double(j, "router_jitter_noise", source, 0.0) != 0.0) {
      fail(source, "router_jitter_noise", "is not supported (it perturbs the router's input in training); use 0");
    }
  }
  if (c.hidden_act != "silu" && c.hidden_act != "gelu_pytorch_tanh") {
    fail(source, is_gemma2 ? "hidden_activation" : "hidden_act",
         "'" + c.hidden_act + "' is not supported (supported: silu, gelu_pytorch_tanh)");
  }

  // transformers >= 4.56 writes `dtype`; older versions `torch_dtype`.
  const std::string dtype_key = find(j, "dtype") != nullptr ? "dtype" : "torch_dtype";
  c.torch_dtype = get_string(j, dtype_key, source, "float32");
  if (c.torch_dtype != "float32" && c.torch_dtype != "bfloat16" && c.torch_dtype != "float16") {
    fail(source, dtype_key, "'" + c.torch_dtype + "' is not supported (supported: float32, bfloat16, float16)");
  }
  c.bos_token_id = get_optional_int(j, "bos_token_id", source);
  c.eos_token_ids = get_int_list(j, "eos_token_id", source);
  c.pad_token_id = get_optional_int(j, "pad_token_id", source);
  c.validate(source);
  return c;
}

ModelConfig ModelConfig::from_json_text(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number too large for a double
    throw ConfigError(source + ": invalid JSON: " + e.what());
  }
  return from_json(j, source);
}

ModelConfig ModelConfig::from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError("cannot read model config '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return from_json_text(text.str(), path);
}

ModelConfig ModelConfig::from_checkpoint_dir(const std::string& model_path, const std::string& component) {
  if (model_path.empty()) {
    throw ConfigError(component +
                      ": model_path is empty; it names a Hugging Face checkpoint directory "
                      "(config.json + model.safetensors), e.g. one written by `rlcore model init`");
  }
  std::error_code error;
  if (!std::filesystem::is_directory(model_path, error)) {
    throw ConfigError(component + ": model_path '" + model_path + "' is not a directory" +
                      (std::filesystem::exists(model_path, error) ? "" : " (it does not exist)"));
  }
  return from_file((std::filesystem::path(model_path) / "config.json").string());
}

void ModelConfig::validate(const std::string& source) const {
  if (!is_supported_model_type(model_type)) {
    fail(source, "model_type", "'" + model_type + "' is not supported (supported: " + kSupportedModelTypes + ")");
  }
  const std::pair<const char*, int64_t> sizes[] = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_hidden_layers", num_hidden_layers},
      {"num_attention_heads", num_attention_heads},
      {"num_key_value_heads", num_key_value_heads},
      {latent_attention() ? "qk_rope_head_dim" : "head_dim", head_dim},
      {"max_position_embeddings", max_position_embeddings},
  };
  for (const auto& [field, value] : sizes) check_positive(source, field, static_cast<double>(value));
  check_positive(source, "rms_norm_eps", rms_norm_eps);
  check_positive(source, "rope_theta", rope_theta);
  check_positive(source, "rope_scaling.factor", rope_scaling.factor);
  if (num_attention_heads % num_key_value_heads != 0) {
    fail(source, "num_key_value_heads",
         "(" + std::to_string(num_key_value_heads) + ") must divide num_attention_heads (" +
             std::to_string(num_attention_heads) + ")");
  }
  if (head_dim % 2 != 0) {
    fail(source, latent_attention() ? "qk_rope_head_dim" : "head_dim", "must be even for rotary embeddings");
  }
  // The per-arch module structure is fixed by HF; a mutated config must not
  // describe a model that HF would build differently from its config.json.
  const bool is_qwen2 = model_type == "qwen2";
  if (is_qwen2 ? (!qkv_bias || o_proj_bias) : qkv_bias != o_proj_bias) {
    fail(source, "attention_bias", "does not match what " + model_type + " builds");
  }
  if (mlp_bias && model_type != "llama") fail(source, "mlp_bias", "is only supported by llama");
  const bool is_qwen3_moe = model_type == "qwen3_moe";
  const bool is_mixtral = model_type == "mixtral";
  if (qk_norm != (model_type == "qwen3" || is_qwen3_moe))
    fail(source, "qk_norm", "is set exactly for qwen3 and qwen3_moe");
  const bool is_deepseek_v3 = model_type == "deepseek_v3";
  if (is_moe() != (is_qwen3_moe || is_mixtral || is_deepseek_v3)) {
    fail(source, "num_experts", "is set exactly for qwen3_moe, mixtral and deepseek_v3 (a positive count)");
  }
  if (is_deepseek_v3) {
    validate_deepseek_v3(*this, source);
  } else if (latent_attention() || q_lora_rank || qk_nope_head_dim != 0 || v_head_dim != 0 || rope_interleave ||
             n_shared_experts != 0 || n_group != 1 || topk_group != 1 || routed_scaling_factor != 1.0 ||
             first_k_dense_replace != 0 || rope_scaling.mscale_all_dim != 0.0) {
    fail(source, "kv_lora_rank", "and the other DeepSeek-V3 fields are set exactly for deepseek_v3");
  }
  if (is_mixtral && (moe_intermediate_size != intermediate_size || !norm_topk_prob || decoder_sparse_step != 1 ||
                     !mlp_only_layers.empty())) {
    fail(source, "num_local_experts", "mixtral's experts are every layer's, of intermediate_size, renormalised");
  }
  if (is_moe()) {
    check_positive(source, "moe_intermediate_size", static_cast<double>(moe_intermediate_size));
    if (num_experts_per_tok < 1 || num_experts_per_tok > num_experts) {
      fail(source, "num_experts_per_tok",
           "(" + std::to_string(num_experts_per_tok) + ") must be between 1 and num_experts (" +
               std::to_string(num_experts) + ")");
    }
    check_positive(source, "decoder_sparse_step", static_cast<double>(decoder_sparse_step));
    for (int64_t layer : mlp_only_layers) {
      if (layer < 0 || layer >= num_hidden_layers) {
        fail(source, "mlp_only_layers", "names layer " + std::to_string(layer) + ", which the model does not have");
      }
    }
    if (router_aux_loss_coef < 0) fail(source, "router_aux_loss_coef", "must not be negative");
  }
  const bool is_gemma2 = model_type == "gemma2";
  if (sliding_window && model_type != "mistral" && !is_mixtral && !is_gemma2) {
    fail(source, "sliding_window", "is only supported by mistral, mixtral and gemma2");
  }
  if (!sliding_layers.empty() && (!is_gemma2 || static_cast<int64_t>(sliding_layers.size()) != num_hidden_layers)) {
    fail(source, "layer_types", "is gemma2's, one entry per layer");
  }
  if (norm_weight_offset != is_gemma2 || sandwich_norms != is_gemma2 || scale_embeddings != is_gemma2 ||
      (query_pre_attn_scalar || attn_logit_softcapping || final_logit_softcapping) && !is_gemma2) {
    fail(source, "model_type", "gemma2's norms, embedding scale and soft-capping are set exactly for gemma2");
  }
  if (hidden_act != "silu" && hidden_act != "gelu_pytorch_tanh") {
    fail(source, "hidden_act", "'" + hidden_act + "' is not supported (supported: silu, gelu_pytorch_tanh)");
  }
  if (query_pre_attn_scalar) check_positive(source, "query_pre_attn_scalar", *query_pre_attn_scalar);
  if (attn_logit_softcapping) check_positive(source, "attn_logit_softcapping", *attn_logit_softcapping);
  if (final_logit_softcapping) check_positive(source, "final_logit_softcapping", *final_logit_softcapping);
  if (sliding_window) check_positive(source, "sliding_window", static_cast<double>(*sliding_window));
  if ((model_type == "mistral" || is_mixtral) && qkv_bias) {
    fail(source, "attention_bias", "does not match what " + model_type + " builds");
  }
  if (rope_scaling.rope_type == "llama3" && rope_scaling.high_freq_factor <= rope_scaling.low_freq_factor) {
    fail(source, "rope_scaling.high_freq_factor", "must exceed low_freq_factor");
  }
}

double ModelConfig::attention_scaling() const {
  if (latent_attention()) {
    // HF's yarn_apply_mscale, in its op order.
    double scaling = std::pow(static_cast<double>(qk_head_dim()), -0.5);
    if (rope_scaling.rope_type != "default" && rope_scaling.mscale_all_dim != 0.0) {
      const double mscale =
          rope_scaling.factor <= 1 ? 1.0 : 0.1 * rope_scaling.mscale_all_dim * std::log(rope_scaling.factor) + 1.0;
      scaling = scaling * mscale * mscale;
    }
    return scaling;
  }
  return std::pow(query_pre_attn_scalar.value_or(static_cast<double>(head_dim)), -0.5);  // HF: x**-0.5
}

c10::ScalarType ModelConfig::dtype() const {
  if (torch_dtype == "bfloat16") return c10::ScalarType::BFloat16;
  if (torch_dtype == "float16") return c10::ScalarType::Half;
  return c10::ScalarType::Float;
}

namespace {

void write_deepseek_v3(const ModelConfig& c, json& j) {
  j["attention_bias"] = c.qkv_bias;
  j["qk_rope_head_dim"] = c.head_dim;
  j["qk_nope_head_dim"] = c.qk_nope_head_dim;
  j["v_head_dim"] = c.v_head_dim;
  j["kv_lora_rank"] = c.kv_lora_rank;
  j["q_lora_rank"] = c.q_lora_rank ? json(*c.q_lora_rank) : json(nullptr);
  j["rope_interleave"] = c.rope_interleave;
  j["n_routed_experts"] = c.num_experts;
  j["n_shared_experts"] = c.n_shared_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["n_group"] = c.n_group;
  j["topk_group"] = c.topk_group;
  j["routed_scaling_factor"] = c.routed_scaling_factor;
  j["norm_topk_prob"] = c.norm_topk_prob;
  j["first_k_dense_replace"] = c.first_k_dense_replace;
  j["output_router_logits"] = false;
}

}  // namespace

json ModelConfig::to_json() const {
  static const std::map<std::string, std::string> kArchitectures = {
      {"gemma2", "Gemma2ForCausalLM"},      {"llama", "LlamaForCausalLM"},           {"mistral", "MistralForCausalLM"},
      {"mixtral", "MixtralForCausalLM"},    {"qwen2", "Qwen2ForCausalLM"},           {"qwen3", "Qwen3ForCausalLM"},
      {"qwen3_moe", "Qwen3MoeForCausalLM"}, {"deepseek_v3", "DeepseekV3ForCausalLM"}};
  validate("ModelConfig::to_json");
  json j;
  j["architectures"] = json::array({kArchitectures.at(model_type)});
  j["model_type"] = model_type;
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = head_dim;
  j[model_type == "gemma2" ? "hidden_activation" : "hidden_act"] = hidden_act;
  j["max_position_embeddings"] = max_position_embeddings;
  j["initializer_range"] = initializer_range;
  j["rms_norm_eps"] = rms_norm_eps;
  j["rope_theta"] = rope_theta;
  if (rope_scaling.rope_type == "default") {
    j["rope_scaling"] = nullptr;
  } else {
    json r = {{"rope_type", rope_scaling.rope_type}, {"factor", rope_scaling.factor}};
    if (rope_scaling.rope_type == "llama3") {
      r["low_freq_factor"] = rope_scaling.low_freq_factor;
      r["high_freq_factor"] = rope_scaling.high_freq_factor;
    } else if (rope_scaling.rope_type == "yarn") {
      r["beta_fast"] = rope_scaling.beta_fast;
      r["beta_slow"] = rope_scaling.beta_slow;
      r["truncate"] = rope_scaling.truncate;
      r["attention_factor"] = rope_scaling.attention_factor;
    }
    if (rope_scaling.mscale_all_dim != 0.0) r["mscale_all_dim"] = rope_scaling.mscale_all_dim;
    if (rope_scaling.rope_type != "linear") {
      r["original_max_position_embeddings"] = rope_scaling.original_max_position_embeddings;
    }
    j["rope_scaling"] = r;
  }
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["attention_dropout"] = 0.0;
  j["use_cache"] = true;
  j["torch_dtype"] = torch_dtype;
  j["transformers_version"] = "4.51.0";  // the first release with qwen3
  if (model_type == "llama") {
    j["attention_bias"] = qkv_bias;
    j["mlp_bias"] = mlp_bias;
    j["pretraining_tp"] = 1;
  } else if (model_type == "mistral" || model_type == "mixtral") {
    j["sliding_window"] = sliding_window ? json(*sliding_window) : json(nullptr);
    if (model_type == "mixtral") {
      j["num_local_experts"] = num_experts;
      j["num_experts_per_tok"] = num_experts_per_tok;
      j["router_aux_loss_coef"] = router_aux_loss_coef;
      j["router_jitter_noise"] = 0.0;
      j["output_router_logits"] = false;
    }
  } else if (model_type == "deepseek_v3") {
    write_deepseek_v3(*this, j);
  } else if (model_type == "gemma2") {
    j["attention_bias"] = qkv_bias;
    j["sliding_window"] = sliding_window ? json(*sliding_window) : json(nullptr);
    json layer_types = json::array();
    for (bool slides : sliding_layers) layer_types.push_back(slides ? "sliding_attention" : "full_attention");
    j["layer_types"] = layer_types;
    // Gemma2Config types it int: written so when whole, as HF writes it.
    const double scalar = query_pre_attn_scalar.value_or(static_cast<double>(head_dim));
    j["query_pre_attn_scalar"] = scalar == std::floor(scalar) ? json(static_cast<int64_t>(scalar)) : json(scalar);
    j["attn_logit_softcapping"] = attn_logit_softcapping ? json(*attn_logit_softcapping) : json(nullptr);
    j["final_logit_softcapping"] = final_logit_softcapping ? json(*final_logit_softcapping) : json(nullptr);
  } else {
    if (model_type == "qwen3" || is_moe()) j["attention_bias"] = qkv_bias;
    if (is_moe()) {
      j["num_experts"] = num_experts;
      j["num_experts_per_tok"] = num_experts_per_tok;
      j["moe_intermediate_size"] = moe_intermediate_size;
      j["norm_topk_prob"] = norm_topk_prob;
      j["decoder_sparse_step"] = decoder_sparse_step;
      j["mlp_only_layers"] = mlp_only_layers;
      j["router_aux_loss_coef"] = router_aux_loss_coef;
      j["output_router_logits"] = false;
    }
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = num_hidden_layers;
  }
  j["bos_token_id"] = bos_token_id ? json(*bos_token_id) : json(nullptr);
  if (eos_token_ids.empty()) {
    j["eos_token_id"] = nullptr;
  } else if (eos_token_ids.size() == 1) {
    j["eos_token_id"] = eos_token_ids.front();
  } else {
    j["eos_token_id"] = eos_token_ids;
  }
  if (pad_token_id) j["pad_token_id"] = *pad_token_id;
  return j;
}

std::string ModelConfig::to_json_text() const { return to_json().dump(2) + "\n"; }

bool is_supported_model_type(const std::string& model_type) {
  return model_type == "deepseek_v3" || model_type == "gemma2" || model_type == "llama" || model_type == "mistral" ||
         model_type == "mixtral" || model_type == "qwen2" || model_type == "qwen3" || model_type == "qwen3_moe";
}

bool ModelConfig::layer_is_sparse(int64_t layer) const {
  return is_moe() && layer >= first_k_dense_replace && (layer + 1) % decoder_sparse_step == 0 &&
         std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) == mlp_only_layers.end();
}

namespace {

// DeepSeek-V3's proportions, scaled to the preset's width: latent attention
// (one head's halves: the rotary part and the value), 8 experts of a quarter
// width in 4 groups (2 searched), 2 per token, one shared expert, the first layer dense.
void set_deepseek_v3_shape(ModelConfig& c) {
  const int64_t head = c.hidden_size / c.num_attention_heads;
  c.num_key_value_heads = c.num_attention_heads;
  c.head_dim = head / 2;
  c.qk_nope_head_dim = head;
  c.v_head_dim = head;
  c.kv_lora_rank = c.hidden_size / 2;
  c.q_lora_rank = c.hidden_size * 3 / 4;
  c.rope_interleave = true;
  c.rope_theta = 10000.0;
  c.num_experts = 8;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = c.intermediate_size / 4;
  c.n_shared_experts = 1;
  c.n_group = 4;
  c.topk_group = 2;
  c.routed_scaling_factor = 2.5;
  c.norm_topk_prob = true;
  c.first_k_dense_replace = 1;
  c.router_aux_loss_coef = 0.0;
}

}  // namespace

ModelConfig preset(const std::string& arch, const std::string& size, int64_t vocab_size) {
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3" && arch != "qwen3_moe" && arch != "deepseek_v3") {
    throw ConfigError("unknown model arch '" + arch + "' (supported: llama, qwen2, qwen3, qwen3_moe, deepseek_v3)");
  }
  ModelConfig c;
  c.model_type = arch;
  c.vocab_size = vocab_size;
  if (size == "tiny") {
    c.hidden_size = 128, c.num_hidden_layers = 4, c.num_attention_heads = 4, c.num_key_value_heads = 2;
    c.intermediate_size = 384, c.max_position_embeddings = 2048, c.torch_dtype = "float32";
  } else if (size == "100m") {
    c.hidden_size = 768, c.num_hidden_layers = 12, c.num_attention_heads = 12, c.num_key_value_heads = 4;
    c.intermediate_size = 2048, c.max_position_embeddings = 4096, c.torch_dtype = "bfloat16";
  } else if (size == "1b") {
    c.hidden_size = 2048, c.num_hidden_layers = 16, c.num_attention_heads = 32, c.num_key_value_heads = 8;
    c.intermediate_size = 8192, c.max_position_embeddings = 4096, c.torch_dtype = "bfloat16";
  } else {
    throw ConfigError("unknown model size '" + size + "' (supported: tiny, 100m, 1b)");
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  c.tie_word_embeddings = true;
  // Llama 3 and Qwen 2/3 values.
  c.rope_theta = arch == "llama" ? 500000.0 : 1000000.0;
  c.rms_norm_eps = arch == "llama" ? 1e-5 : 1e-6;
  c.qkv_bias = arch == "qwen2";
  c.qk_norm = arch == "qwen3" || arch == "qwen3_moe";
  if (arch == "qwen3_moe") {  // Qwen3-30B-A3B's shape, scaled: 8 experts of a quarter width, 2 per token
    c.num_experts = 8;
    c.num_experts_per_tok = 2;
    c.moe_intermediate_size = c.intermediate_size / 4;
    c.norm_topk_prob = true;
  }
  if (arch == "deepseek_v3") set_deepseek_v3_shape(c);
  c.validate("preset " + arch + "/" + size);
  return c;
}

}  // namespace rlcore::model
