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

#include "config_json.h"
#include "rlcore/error.h"
#include "rlcore/model/architecture.h"

namespace rlcore::model {
namespace {

using namespace config_json;

// HF's yarn attention factor when the file leaves it out: 0.1 * mscale * ln(factor) + 1
// (1 for factor <= 1), as a ratio when both mscale and mscale_all_dim are given.
double yarn_attention_factor(double factor, double mscale, double mscale_all_dim) {
  const auto get_mscale = [factor](double scale) { return factor <= 1 ? 1.0 : 0.1 * scale * std::log(factor) + 1.0; };
  if (mscale != 0 && mscale_all_dim != 0) return get_mscale(mscale) / get_mscale(mscale_all_dim);
  return get_mscale(1.0);
}

// transformers <= 4.5x: `rope_theta` + `rope_scaling`; newer: `rope_parameters`
// holding both. Either spelling of the type key ("rope_type", older "type").
// With latent attention the scale also takes `mscale_all_dim` (DeepSeek-V3).
void parse_rope(const json& j, const std::string& source, bool latent_attention, ModelConfig& c) {
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
  if (latent_attention) r.mscale_all_dim = get_double(*scaling, "mscale_all_dim", where, 0.0);
}

// "DeepseekV3, Gemma2, ... and Qwen3Moe": the registered HF class stems.
std::string hf_class_names() {
  std::string text;
  const std::vector<Architecture>& all = architectures();
  for (size_t i = 0; i < all.size(); ++i) {
    if (i > 0) text += i + 1 == all.size() ? " and " : ", ";
    text += all[i].hf_class;
  }
  return text;
}

// The fields a family's layer choices fix; from_json then reads `attention_bias`
// and `mlp_bias` where the family has them.
void set_layer_choices(const LayerChoices& layers, ModelConfig& c) {
  c.qkv_bias = layers.attention_bias == AttentionBias::kQkvOnly;
  c.o_proj_bias = false;
  c.qk_norm = layers.qk_norm;
  c.norm_weight_offset = c.sandwich_norms = c.scale_embeddings = layers.gemma_norms;
}

bool has_mlp_bias(const Architecture& a) { return a.layers.mlp_bias; }
bool has_qk_norm(const Architecture& a) { return a.layers.qk_norm; }
bool has_moe(const Architecture& a) { return a.layers.moe; }
bool has_latent_attention(const Architecture& a) { return a.layers.latent_attention; }
bool has_sliding_window(const Architecture& a) { return a.layers.sliding_window; }
bool has_per_layer_sliding(const Architecture& a) { return a.layers.per_layer_sliding; }
bool has_gemma_norms(const Architecture& a) { return a.layers.gemma_norms; }
bool has_preset(const Architecture& a) { return a.preset != nullptr; }

// `architectures` names the HF class; a decoder rlcore does not build (MoE,
// vision-language, ...) is refused by that name before anything else is read.
void check_architectures(const json& j, const std::string& source) {
  const json* classes = find(j, "architectures");
  if (classes == nullptr) return;
  if (!classes->is_array()) fail(source, "architectures", "must be a list of class names");
  static const std::vector<std::string> kHeads = {"ForCausalLM", "ForTokenClassification", "ForSequenceClassification"};
  for (const json& name : *classes) {
    if (!name.is_string()) fail(source, "architectures", "must be a list of class names, got " + name.dump());
    const std::string text = name.get<std::string>();
    const bool known = std::any_of(architectures().begin(), architectures().end(), [&](const Architecture& a) {
      return std::any_of(kHeads.begin(), kHeads.end(),
                         [&](const std::string& head) { return text == a.hf_class + head; });
    });
    if (!known) {
      fail(source, "architectures",
           "'" + text + "' is not supported: rlcore builds " + hf_class_names() +
               " *ForCausalLM, *ForTokenClassification, *ForSequenceClassification; other mixtures of experts and " +
               "vision models are not");
    }
  }
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
  const Architecture* arch = lookup_architecture(c.model_type);
  if (arch == nullptr) {
    fail(source, "model_type", "'" + c.model_type + "' is not supported (supported: " + architecture_names() + ")");
  }

  c.vocab_size = get_int(j, "vocab_size", source);
  c.hidden_size = get_int(j, "hidden_size", source);
  c.intermediate_size = get_int(j, "intermediate_size", source);
  c.num_hidden_layers = get_int(j, "num_hidden_layers", source);
  c.num_attention_heads = get_int(j, "num_attention_heads", source);
  c.num_key_value_heads = get_int(j, "num_key_value_heads", source, c.num_attention_heads);
  if (find(j, arch->head_dim_key) != nullptr) {
    c.head_dim = get_int(j, arch->head_dim_key, source);
  } else if (arch->default_head_dim > 0) {
    c.head_dim = arch->default_head_dim;  // the config class's default, not hidden/heads
  } else {
    check_positive(source, "num_attention_heads", static_cast<double>(c.num_attention_heads));
    if (c.hidden_size % c.num_attention_heads != 0) {
      fail(source, "hidden_size",
           "(" + std::to_string(c.hidden_size) + ") must be divisible by num_attention_heads (" +
               std::to_string(c.num_attention_heads) + ") when head_dim is absent");
    }
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  c.max_position_embeddings = get_int(j, "max_position_embeddings", source, arch->default_max_position_embeddings);
  c.rms_norm_eps = get_double(j, "rms_norm_eps", source, 1e-6);
  c.initializer_range = get_double(j, "initializer_range", source, 0.02);
  c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", source, arch->default_tie_word_embeddings);
  parse_rope(j, source, arch->layers.latent_attention, c);

  c.hidden_act = get_string(j, "hidden_act", source, "silu");
  if (!arch->layers.sliding_window && get_bool(j, "use_sliding_window", source, false)) {
    fail(source, "use_sliding_window", "true is not supported for " + c.model_type + " (mistral's sliding_window is)");
  }
  set_layer_choices(arch->layers, c);
  if (arch->layers.attention_bias == AttentionBias::kOptional) {
    c.qkv_bias = c.o_proj_bias = get_bool(j, "attention_bias", source, false);
  }
  c.mlp_bias = arch->layers.mlp_bias && get_bool(j, "mlp_bias", source, false);
  if (arch->parse != nullptr) arch->parse(j, source, c);
  if (c.hidden_act != "silu" && c.hidden_act != "gelu_pytorch_tanh") {
    fail(source, arch->hidden_act_key, "'" + c.hidden_act + "' is not supported (supported: silu, gelu_pytorch_tanh)");
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
  const Architecture* arch = lookup_architecture(model_type);
  if (arch == nullptr) {
    fail(source, "model_type", "'" + model_type + "' is not supported (supported: " + architecture_names() + ")");
  }
  const LayerChoices& layers = arch->layers;
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
  const bool bias_matches = layers.attention_bias == AttentionBias::kQkvOnly ? qkv_bias && !o_proj_bias
                            : layers.attention_bias == AttentionBias::kNone  ? !qkv_bias && !o_proj_bias
                                                                             : qkv_bias == o_proj_bias;
  if (!bias_matches) fail(source, "attention_bias", "does not match what " + model_type + " builds");
  if (mlp_bias && !layers.mlp_bias) {
    fail(source, "mlp_bias", "is only supported by " + architecture_names(has_mlp_bias, true));
  }
  if (qk_norm != layers.qk_norm) fail(source, "qk_norm", "is set exactly for " + architecture_names(has_qk_norm, true));
  if (is_moe() != layers.moe) {
    fail(source, "num_experts", "is set exactly for " + architecture_names(has_moe, true) + " (a positive count)");
  }
  if (!layers.latent_attention &&
      (latent_attention() || q_lora_rank || qk_nope_head_dim != 0 || v_head_dim != 0 || rope_interleave ||
       n_shared_experts != 0 || n_group != 1 || topk_group != 1 || routed_scaling_factor != 1.0 ||
       first_k_dense_replace != 0 || rope_scaling.mscale_all_dim != 0.0)) {
    fail(source, "kv_lora_rank",
         "and the other DeepSeek-V3 fields are set exactly for " + architecture_names(has_latent_attention, true));
  }
  if (arch->validate != nullptr) arch->validate(*this, source);
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
  if (sliding_window && !layers.sliding_window) {
    fail(source, "sliding_window", "is only supported by " + architecture_names(has_sliding_window, true));
  }
  if (!sliding_layers.empty() &&
      (!layers.per_layer_sliding || static_cast<int64_t>(sliding_layers.size()) != num_hidden_layers)) {
    fail(source, "layer_types", "is " + architecture_names(has_per_layer_sliding, true) + "'s, one entry per layer");
  }
  const bool gemma_norms = layers.gemma_norms;
  if (norm_weight_offset != gemma_norms || sandwich_norms != gemma_norms || scale_embeddings != gemma_norms ||
      (query_pre_attn_scalar || attn_logit_softcapping || final_logit_softcapping) && !gemma_norms) {
    fail(source, "model_type",
         "norms, embedding scale and soft-capping are set exactly for " + architecture_names(has_gemma_norms, true));
  }
  if (hidden_act != "silu" && hidden_act != "gelu_pytorch_tanh") {
    fail(source, "hidden_act", "'" + hidden_act + "' is not supported (supported: silu, gelu_pytorch_tanh)");
  }
  if (query_pre_attn_scalar) check_positive(source, "query_pre_attn_scalar", *query_pre_attn_scalar);
  if (attn_logit_softcapping) check_positive(source, "attn_logit_softcapping", *attn_logit_softcapping);
  if (final_logit_softcapping) check_positive(source, "final_logit_softcapping", *final_logit_softcapping);
  if (sliding_window) check_positive(source, "sliding_window", static_cast<double>(*sliding_window));
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

json ModelConfig::to_json() const {
  validate("ModelConfig::to_json");
  const Architecture& arch = architecture();
  json j;
  j["architectures"] = json::array({std::string(arch.hf_class) + "ForCausalLM"});
  j["model_type"] = model_type;
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = head_dim;
  j[arch.hidden_act_key] = hidden_act;
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
  if (arch.write != nullptr) arch.write(*this, j);
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

bool is_supported_model_type(const std::string& model_type) { return lookup_architecture(model_type) != nullptr; }

bool ModelConfig::layer_is_sparse(int64_t layer) const {
  return is_moe() && layer >= first_k_dense_replace && (layer + 1) % decoder_sparse_step == 0 &&
         std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) == mlp_only_layers.end();
}

ModelConfig preset(const std::string& arch, const std::string& size, int64_t vocab_size) {
  const Architecture* architecture = lookup_architecture(arch);
  if (architecture == nullptr || architecture->preset == nullptr) {
    throw ConfigError("unknown model arch '" + arch + "' (supported: " + architecture_names(has_preset) + ")");
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
  set_layer_choices(architecture->layers, c);
  architecture->preset(c);
  c.validate("preset " + arch + "/" + size);
  return c;
}

}  // namespace rlcore::model
