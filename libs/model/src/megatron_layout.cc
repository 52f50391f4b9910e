// The Megatron-core layout of the Llama / Qwen / MoE / DeepSeek-V3 decoder: parameter
// names and shapes, fusion of q/k/v (per query group) and gate/up, TP shards, PP stages.
#include "rlcore/model/megatron_layout.h"

#include <ATen/ATen.h>

#include "rlcore/error.h"
#include "rlcore/model/architecture.h"

namespace rlcore::model::megatron {
namespace {

enum class Fusion {
  kNone,  // one HF tensor, same layout
  kQkv,   // [q; k; v] regrouped per query group
  kFc1,   // [gate; up]
};

// Which layers hold an entry: every layer, dense ones (a plain MLP), sparse
// ones (a router), or each expert of a sparse layer (names carry the expert).
enum class Scope { kAnyLayer, kDense, kSparse, kExpert };

// One Megatron parameter of a decoder layer (or of the model) and its HF sources.
struct Entry {
  const char* megatron;  // suffix after "decoder.layers.N." (experts: after "...local_experts.E.")
  // Suffixes after "model.layers.N." (experts: after "<block>.experts.E."), in
  // Qwen's names: a sparse block's ("mlp.", gate_proj ...) are the architecture's (hf_suffix).
  std::vector<const char*> hf;
  Fusion fusion;
  TpSplit split;
  bool (*present)(const ModelConfig&);
  Scope scope = Scope::kAnyLayer;
};

bool always(const ModelConfig&) { return true; }
bool fused_qkv(const ModelConfig& c) { return !c.latent_attention(); }
bool has_qkv_bias(const ModelConfig& c) { return c.qkv_bias && !c.latent_attention(); }
bool has_qk_norm(const ModelConfig& c) { return c.qk_norm; }
// DeepSeek-V3's latent attention: queries low-rank (q_lora_rank) or through one q_proj.
bool latent(const ModelConfig& c) { return c.latent_attention(); }
bool latent_q_proj(const ModelConfig& c) { return c.latent_attention() && !c.q_lora_rank; }
bool latent_q_lora(const ModelConfig& c) { return c.latent_attention() && c.q_lora_rank.has_value(); }
bool latent_q_lora_bias(const ModelConfig& c) { return latent_q_lora(c) && c.qkv_bias; }
bool latent_kv_bias(const ModelConfig& c) { return c.latent_attention() && c.qkv_bias; }
bool has_expert_bias(const ModelConfig& c) { return c.architecture().layers.moe_style == MoeStyle::kDeepseekV3; }
bool has_shared_experts(const ModelConfig& c) { return c.n_shared_experts > 0; }
bool has_o_proj_bias(const ModelConfig& c) { return c.o_proj_bias; }
bool has_mlp_bias(const ModelConfig& c) { return c.mlp_bias; }
bool untied(const ModelConfig& c) { return !c.tie_word_embeddings; }

const std::vector<Entry>& layer_entries() {
  static const std::vector<Entry> entries = {
      {"input_layernorm.weight", {"input_layernorm.weight"}, Fusion::kNone, TpSplit::kReplicated, always},
      {"self_attention.linear_qkv.weight",
       {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"},
       Fusion::kQkv,
       TpSplit::kColumn,
       fused_qkv},
      {"self_attention.linear_qkv.bias",
       {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"},
       Fusion::kQkv,
       TpSplit::kColumn,
       has_qkv_bias},
      {"self_attention.q_layernorm.weight",
       {"self_attn.q_norm.weight"},
       Fusion::kNone,
       TpSplit::kReplicated,
       has_qk_norm},
      {"self_attention.k_layernorm.weight",
       {"self_attn.k_norm.weight"},
       Fusion::kNone,
       TpSplit::kReplicated,
       has_qk_norm},
      // Latent attention (Megatron-core's MLASelfAttention, local spec): the down
      // projections and their norms replicated, the up projections column-parallel
      // by whole heads ([heads][nope + rope] and [heads][nope + v] rows).
      {"self_attention.linear_q_proj.weight",
       {"self_attn.q_proj.weight"},
       Fusion::kNone,
       TpSplit::kColumn,
       latent_q_proj},
      {"self_attention.linear_q_down_proj.weight",
       {"self_attn.q_a_proj.weight"},
       Fusion::kNone,
       TpSplit::kReplicated,
       latent_q_lora},
      {"self_attention.linear_q_down_proj.bias",
       {"self_attn.q_a_proj.bias"},
       Fusion::kNone,
       TpSplit::kReplicated,
       latent_q_lora_bias},
      {"self_attention.q_layernorm.weight",
       {"self_attn.q_a_layernorm.weight"},
       Fusion::kNone,
       TpSplit::kReplicated,
       latent_q_lora},
      {"self_attention.linear_q_up_proj.weight",
       {"self_attn.q_b_proj.weight"},
       Fusion::kNone,
       TpSplit::kColumn,
       latent_q_lora},
      {"self_attention.linear_kv_down_proj.weight",
       {"self_attn.kv_a_proj_with_mqa.weight"},
       Fusion::kNone,
       TpSplit::kReplicated,
       latent},
      {"self_attention.linear_kv_down_proj.bias",
       {"self_attn.kv_a_proj_with_mqa.bias"},
       Fusion::kNone,
       TpSplit::kReplicated,
       latent_kv_bias},
      {"self_attention.kv_layernorm.weight",
       {"self_attn.kv_a_layernorm.weight"},
       Fusion::kNone,
       TpSplit::kReplicated,
       latent},
      {"self_attention.linear_kv_up_proj.weight",
       {"self_attn.kv_b_proj.weight"},
       Fusion::kNone,
       TpSplit::kColumn,
       latent},
      {"self_attention.linear_proj.weight", {"self_attn.o_proj.weight"}, Fusion::kNone, TpSplit::kRow, always},
      {"self_attention.linear_proj.bias",
       {"self_attn.o_proj.bias"},
       Fusion::kNone,
       TpSplit::kReplicated,
       has_o_proj_bias},
      {"pre_mlp_layernorm.weight", {"post_attention_layernorm.weight"}, Fusion::kNone, TpSplit::kReplicated, always},
      {"mlp.linear_fc1.weight",
       {"mlp.gate_proj.weight", "mlp.up_proj.weight"},
       Fusion::kFc1,
       TpSplit::kColumn,
       always,
       Scope::kDense},
      {"mlp.linear_fc1.bias",
       {"mlp.gate_proj.bias", "mlp.up_proj.bias"},
       Fusion::kFc1,
       TpSplit::kColumn,
       has_mlp_bias,
       Scope::kDense},
      {"mlp.linear_fc2.weight", {"mlp.down_proj.weight"}, Fusion::kNone, TpSplit::kRow, always, Scope::kDense},
      {"mlp.linear_fc2.bias", {"mlp.down_proj.bias"}, Fusion::kNone, TpSplit::kReplicated, has_mlp_bias, Scope::kDense},
      // A sparse layer's router and experts stay whole on every TP rank
      // (expert tensor parallel size 1): replicated.
      {"mlp.router.weight", {"mlp.gate.weight"}, Fusion::kNone, TpSplit::kReplicated, always, Scope::kSparse},
      // DeepSeek-V3: the router's score-correction bias (HF's buffer) and the
      // shared experts, whole on every TP rank like the routed ones.
      {"mlp.router.expert_bias",
       {"mlp.gate.e_score_correction_bias"},
       Fusion::kNone,
       TpSplit::kReplicated,
       has_expert_bias,
       Scope::kSparse},
      {"mlp.shared_experts.linear_fc1.weight",
       {"mlp.shared_experts.gate_proj.weight", "mlp.shared_experts.up_proj.weight"},
       Fusion::kFc1,
       TpSplit::kReplicated,
       has_shared_experts,
       Scope::kSparse},
      {"mlp.shared_experts.linear_fc2.weight",
       {"mlp.shared_experts.down_proj.weight"},
       Fusion::kNone,
       TpSplit::kReplicated,
       has_shared_experts,
       Scope::kSparse},
      {"linear_fc1.weight",
       {"gate_proj.weight", "up_proj.weight"},
       Fusion::kFc1,
       TpSplit::kReplicated,
       always,
       Scope::kExpert},
      {"linear_fc2.weight", {"down_proj.weight"}, Fusion::kNone, TpSplit::kReplicated, always, Scope::kExpert},
  };
  return entries;
}

const Entry kEmbedding{
    "embedding.word_embeddings.weight", {"model.embed_tokens.weight"}, Fusion::kNone, TpSplit::kColumn, always};
const Entry kFinalNorm{
    "decoder.final_layernorm.weight", {"model.norm.weight"}, Fusion::kNone, TpSplit::kReplicated, always};
const Entry kOutputLayer{"output_layer.weight", {"lm_head.weight"}, Fusion::kNone, TpSplit::kColumn, untied};

const std::string kMegatronLayerPrefix = "decoder.layers.";
const std::string kHfLayerPrefix = "model.layers.";

// "decoder.layers.3.mlp.linear_fc1.weight" with prefix "decoder.layers." -> {3, "mlp.linear_fc1.weight"}.
bool split_layer_name(const std::string& name, const std::string& prefix, int64_t& layer, std::string& suffix) {
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return false;
  const std::string index = name.substr(prefix.size(), dot - prefix.size());
  if (index.find_first_not_of("0123456789") != std::string::npos) return false;
  layer = std::stoll(index);
  suffix = name.substr(dot + 1);
  return true;
}

// Whether `entry` is a parameter of `layer` (its presence and the layer's kind).
bool in_layer(const ModelConfig& config, const Entry& entry, int64_t layer) {
  if (!entry.present(config)) return false;
  switch (entry.scope) {
    case Scope::kAnyLayer:
      return true;
    case Scope::kDense:
      return !config.layer_is_sparse(layer);
    case Scope::kSparse:
    case Scope::kExpert:
      return config.layer_is_sparse(layer);
  }
  return false;
}

const std::string kMegatronExpertPrefix = "mlp.experts.local_experts.";

std::string hf_expert_prefix(const ModelConfig& config) {
  return std::string(config.architecture().hf_moe_names.block) + ".experts.";
}

// An entry's HF source `source` in the architecture's checkpoint names.
std::string hf_suffix(const ModelConfig& config, const Entry& entry, size_t source) {
  const std::string name = entry.hf[source];
  if (entry.scope != Scope::kSparse && entry.scope != Scope::kExpert) return name;
  const HfMoeNames& names = config.architecture().hf_moe_names;
  const size_t dot = name.find('.');
  const std::string stem = name.substr(0, dot), rest = name.substr(dot);
  if (entry.scope == Scope::kSparse) return names.block + rest;  // stem: "mlp"
  if (stem == "gate_proj") return names.gate_proj + rest;
  if (stem == "up_proj") return names.up_proj + rest;
  return names.down_proj + rest;
}

// "mlp.experts.local_experts.5.linear_fc1.weight" with that prefix -> {5, "linear_fc1.weight"}.
bool split_expert_name(const std::string& suffix, const std::string& prefix, int64_t num_experts, int64_t& expert,
                       std::string& rest) {
  return split_layer_name(suffix, prefix, expert, rest) && expert < num_experts;
}

// A parameter resolved to its entry, layer and (for an expert's) expert.
struct Resolved {
  const Entry* entry = nullptr;
  int64_t layer = -1;
  int64_t expert = -1;
};

Resolved resolve_megatron(const ModelConfig& config, const std::string& name) {
  for (const Entry* global : {&kEmbedding, &kFinalNorm, &kOutputLayer}) {
    if (name == global->megatron && global->present(config)) return {global, -1};
  }
  int64_t layer = -1, expert = -1;
  std::string suffix, rest;
  if (split_layer_name(name, kMegatronLayerPrefix, layer, suffix) && layer < config.num_hidden_layers) {
    const bool is_expert = split_expert_name(suffix, kMegatronExpertPrefix, config.num_experts, expert, rest);
    for (const Entry& entry : layer_entries()) {
      if (!in_layer(config, entry, layer)) continue;
      if (entry.scope == Scope::kExpert ? is_expert && rest == entry.megatron : suffix == entry.megatron)
        return {&entry, layer, entry.scope == Scope::kExpert ? expert : -1};
    }
  }
  throw ValueError("Megatron parameter '" + name + "' is not part of this " + config.model_type + " model (" +
                   std::to_string(config.num_hidden_layers) + " layers" +
                   (config.is_moe() ? ", " + std::to_string(config.num_experts) + " experts" : std::string()) + ")");
}

// The entry an HF tensor belongs to and its position among the entry's sources.
struct ResolvedHf {
  Resolved parameter;
  size_t source = 0;
};

ResolvedHf resolve_hf(const ModelConfig& config, const std::string& hf_name) {
  for (const Entry* global : {&kEmbedding, &kFinalNorm, &kOutputLayer}) {
    if (hf_name == global->hf[0] && global->present(config)) return {{global, -1}, 0};
  }
  int64_t layer = -1, expert = -1;
  std::string suffix, rest;
  if (split_layer_name(hf_name, kHfLayerPrefix, layer, suffix) && layer < config.num_hidden_layers) {
    const bool is_expert = split_expert_name(suffix, hf_expert_prefix(config), config.num_experts, expert, rest);
    for (const Entry& entry : layer_entries()) {
      if (!in_layer(config, entry, layer)) continue;
      for (size_t i = 0; i < entry.hf.size(); ++i) {
        const std::string source = hf_suffix(config, entry, i);
        if (entry.scope == Scope::kExpert ? is_expert && rest == source : suffix == source)
          return {{&entry, layer, entry.scope == Scope::kExpert ? expert : -1}, i};
      }
    }
  }
  throw ValueError("HF tensor '" + hf_name + "' has no place in the Megatron layout of this " + config.model_type +
                   " model");
}

std::string megatron_name(const Resolved& r) {
  if (r.layer < 0) return r.entry->megatron;
  const std::string layer = kMegatronLayerPrefix + std::to_string(r.layer) + ".";
  if (r.expert >= 0) return layer + kMegatronExpertPrefix + std::to_string(r.expert) + "." + r.entry->megatron;
  return layer + r.entry->megatron;
}

std::string hf_name(const ModelConfig& config, const Resolved& r, size_t source) {
  if (r.layer < 0) return r.entry->hf[source];
  const std::string layer = kHfLayerPrefix + std::to_string(r.layer) + ".";
  if (r.expert >= 0) {
    return layer + hf_expert_prefix(config) + std::to_string(r.expert) + "." + hf_suffix(config, *r.entry, source);
  }
  return layer + hf_suffix(config, *r.entry, source);
}

struct Dims {
  int64_t heads, groups, head_dim, per_group, hidden, intermediate, vocab;
};

Dims dims_of(const ModelConfig& c) {
  return {c.num_attention_heads, c.num_key_value_heads, c.head_dim,  c.num_attention_heads / c.num_key_value_heads,
          c.hidden_size,         c.intermediate_size,   c.vocab_size};
}

// The rows of gate (= of up) in a fused [gate; up] linear_fc1.
int64_t fc1_rows(const ModelConfig& config, const Resolved& r) {
  if (r.expert >= 0) return config.moe_intermediate_size;
  if (std::string(r.entry->megatron).find("shared_experts") != std::string::npos)
    return config.n_shared_experts * config.moe_intermediate_size;
  return config.intermediate_size;
}

// Latent attention's shapes (the same names as fused attention's where they are shared).
std::vector<int64_t> latent_shape(const ModelConfig& c, const std::string& suffix) {
  const int64_t q_rows = c.num_attention_heads * c.qk_head_dim();
  const int64_t q_rank = c.q_lora_rank.value_or(0);
  if (suffix == "self_attention.linear_q_proj.weight") return {q_rows, c.hidden_size};
  if (suffix == "self_attention.linear_q_down_proj.weight") return {q_rank, c.hidden_size};
  if (suffix == "self_attention.linear_q_down_proj.bias" || suffix == "self_attention.q_layernorm.weight")
    return {q_rank};
  if (suffix == "self_attention.linear_q_up_proj.weight") return {q_rows, q_rank};
  if (suffix == "self_attention.linear_kv_down_proj.weight") return {c.kv_lora_rank + c.head_dim, c.hidden_size};
  if (suffix == "self_attention.linear_kv_down_proj.bias") return {c.kv_lora_rank + c.head_dim};
  if (suffix == "self_attention.kv_layernorm.weight") return {c.kv_lora_rank};
  if (suffix == "self_attention.linear_kv_up_proj.weight")
    return {c.num_attention_heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank};
  if (suffix == "self_attention.linear_proj.weight") return {c.hidden_size, c.num_attention_heads * c.v_head_dim};
  return {};
}

std::vector<int64_t> canonical_shape(const ModelConfig& config, const Resolved& r) {
  const Dims d = dims_of(config);
  const std::string suffix = r.entry->megatron;
  if (config.latent_attention()) {
    std::vector<int64_t> shape = latent_shape(config, suffix);
    if (!shape.empty()) return shape;
  }
  if (suffix == "mlp.router.expert_bias") return {config.num_experts};
  if (suffix == "mlp.shared_experts.linear_fc1.weight") return {2 * fc1_rows(config, r), d.hidden};
  if (suffix == "mlp.shared_experts.linear_fc2.weight") return {d.hidden, fc1_rows(config, r)};
  const int64_t qkv_rows = d.groups * (d.per_group + 2) * d.head_dim;
  if (suffix == "self_attention.linear_qkv.weight") return {qkv_rows, d.hidden};
  if (suffix == "self_attention.linear_qkv.bias") return {qkv_rows};
  if (suffix == "self_attention.q_layernorm.weight" || suffix == "self_attention.k_layernorm.weight")
    return {d.head_dim};
  if (suffix == "self_attention.linear_proj.weight") return {d.hidden, d.heads * d.head_dim};
  if (r.expert >= 0 && suffix == "linear_fc1.weight") return {2 * config.moe_intermediate_size, d.hidden};
  if (r.expert >= 0 && suffix == "linear_fc2.weight") return {d.hidden, config.moe_intermediate_size};
  if (suffix == "mlp.router.weight") return {config.num_experts, d.hidden};
  if (suffix == "mlp.linear_fc1.weight") return {2 * d.intermediate, d.hidden};
  if (suffix == "mlp.linear_fc1.bias") return {2 * d.intermediate};
  if (suffix == "mlp.linear_fc2.weight") return {d.hidden, d.intermediate};
  if (suffix == "embedding.word_embeddings.weight" || suffix == "output_layer.weight") return {d.vocab, d.hidden};
  return {d.hidden};  // norms and the row-parallel biases
}

MegatronParam make_param(const ModelConfig& config, const Resolved& r) {
  return {megatron_name(r), canonical_shape(config, r), r.entry->split, r.layer, r.expert};
}

int64_t megatron_split_dim(TpSplit split) { return split == TpSplit::kRow ? 1 : 0; }

void check_shards(const MegatronParam& param, int64_t tp_size) {
  if (tp_size < 1) throw ValueError("tensor-parallel size must be >= 1, got " + std::to_string(tp_size));
  if (param.split == TpSplit::kReplicated) return;
  const int64_t dim = megatron_split_dim(param.split);
  if (param.shape[dim] % tp_size != 0) {
    throw ValueError("Megatron parameter '" + param.name + "' (dim " + std::to_string(dim) + " = " +
                     std::to_string(param.shape[dim]) + ") cannot be split " + std::to_string(tp_size) + " ways");
  }
}

bool is_fc1(const MegatronParam& param) { return param.name.find(".mlp.linear_fc1.") != std::string::npos; }

void check_divides(const char* field, int64_t value, int64_t parts, const char* what) {
  if (parts < 1 || value % parts != 0) {
    throw ValueError(std::string(what) + " " + std::to_string(parts) + " does not divide the model's " + field + " (" +
                     std::to_string(value) + ")");
  }
}

}  // namespace

std::vector<MegatronParam> megatron_parameters(const ModelConfig& config) {
  config.validate("megatron layout");
  std::vector<MegatronParam> params{make_param(config, {&kEmbedding, -1})};
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    for (const Entry& entry : layer_entries()) {
      if (in_layer(config, entry, layer) && entry.scope != Scope::kExpert)
        params.push_back(make_param(config, {&entry, layer}));
    }
    if (!config.layer_is_sparse(layer)) continue;
    for (int64_t expert = 0; expert < config.num_experts; ++expert) {
      for (const Entry& entry : layer_entries()) {
        if (in_layer(config, entry, layer) && entry.scope == Scope::kExpert)
          params.push_back(make_param(config, {&entry, layer, expert}));
      }
    }
  }
  params.push_back(make_param(config, {&kFinalNorm, -1}));
  if (kOutputLayer.present(config)) params.push_back(make_param(config, {&kOutputLayer, -1}));
  return params;
}

MegatronParam megatron_parameter(const ModelConfig& config, const std::string& name) {
  return make_param(config, resolve_megatron(config, name));
}

std::vector<std::string> hf_sources(const ModelConfig& config, const std::string& megatron_name) {
  const Resolved r = resolve_megatron(config, megatron_name);
  std::vector<std::string> names;
  for (size_t i = 0; i < r.entry->hf.size(); ++i) names.push_back(hf_name(config, r, i));
  return names;
}

at::Tensor from_hf(const ModelConfig& config, const std::string& megatron_name, const std::vector<at::Tensor>& hf) {
  const Resolved r = resolve_megatron(config, megatron_name);
  if (hf.size() != r.entry->hf.size()) {
    throw ValueError("Megatron parameter '" + megatron_name + "' is built from " + std::to_string(r.entry->hf.size()) +
                     " HF tensors, got " + std::to_string(hf.size()));
  }
  at::Tensor fused;
  if (r.entry->fusion == Fusion::kQkv) {
    const Dims d = dims_of(config);
    // [rows, rest...] -> [groups, rows per group, rest...]; then q, k, v of a group side by side.
    auto grouped = [&](const at::Tensor& t) {
      std::vector<int64_t> shape{d.groups, -1};
      for (int64_t i = 1; i < t.dim(); ++i) shape.push_back(t.size(i));
      return t.reshape(shape);
    };
    fused = at::cat({grouped(hf[0]), grouped(hf[1]), grouped(hf[2])}, 1).flatten(0, 1);
  } else if (r.entry->fusion == Fusion::kFc1) {
    fused = at::cat({hf[0], hf[1]}, 0);
  } else {
    fused = hf[0].clone();
  }
  const std::vector<int64_t> expected = canonical_shape(config, r);
  if (fused.sizes() != at::IntArrayRef(expected)) {
    throw ValueError("Megatron parameter '" + megatron_name + "': HF sources give shape " + c10::str(fused.sizes()) +
                     ", expected " + c10::str(at::IntArrayRef(expected)));
  }
  return fused.contiguous();
}

std::string megatron_source(const ModelConfig& config, const std::string& hf_name) {
  return megatron_name(resolve_hf(config, hf_name).parameter);
}

at::Tensor to_hf(const ModelConfig& config, const std::string& hf_name, const at::Tensor& megatron_full) {
  const ResolvedHf r = resolve_hf(config, hf_name);
  const std::vector<int64_t> expected = canonical_shape(config, r.parameter);
  if (megatron_full.sizes() != at::IntArrayRef(expected)) {
    throw ValueError("Megatron parameter '" + megatron_name(r.parameter) + "' has shape " +
                     c10::str(megatron_full.sizes()) + ", expected " + c10::str(at::IntArrayRef(expected)));
  }
  const Dims d = dims_of(config);
  switch (r.parameter.entry->fusion) {
    case Fusion::kNone:
      return megatron_full;
    case Fusion::kFc1: {
      const int64_t rows = fc1_rows(config, r.parameter);
      return megatron_full.narrow(0, static_cast<int64_t>(r.source) * rows, rows);
    }
    case Fusion::kQkv: {
      std::vector<int64_t> grouped{d.groups, d.per_group + 2, d.head_dim};
      for (int64_t i = 1; i < megatron_full.dim(); ++i) grouped.push_back(megatron_full.size(i));
      const at::Tensor view = megatron_full.view(grouped);
      const int64_t begin = r.source == 0 ? 0 : d.per_group + static_cast<int64_t>(r.source) - 1;
      const int64_t heads = r.source == 0 ? d.per_group : 1;
      return view.narrow(1, begin, heads).flatten(0, 2);  // a copy unless there is one group
    }
  }
  return megatron_full;
}

at::Tensor tp_shard(const ModelConfig& config, const MegatronParam& param, const at::Tensor& full, int64_t tp_rank,
                    int64_t tp_size) {
  check_shards(param, tp_size);
  if (tp_rank < 0 || tp_rank >= tp_size) {
    throw ValueError("Megatron parameter '" + param.name + "': tensor-parallel rank " + std::to_string(tp_rank) +
                     " is outside [0, " + std::to_string(tp_size) + ")");
  }
  if (param.split == TpSplit::kReplicated) return full;
  if (is_fc1(param)) {
    const int64_t rows = config.intermediate_size / tp_size;
    return at::cat(
        {full.narrow(0, tp_rank * rows, rows), full.narrow(0, config.intermediate_size + tp_rank * rows, rows)});
  }
  const int64_t dim = megatron_split_dim(param.split);
  const int64_t size = full.size(dim) / tp_size;
  return full.narrow(dim, tp_rank * size, size);
}

at::Tensor merge_tp_shards(const ModelConfig& config, const MegatronParam& param,
                           const std::vector<at::Tensor>& shards) {
  if (shards.empty()) throw ValueError("Megatron parameter '" + param.name + "': no shards to merge");
  const int64_t tp_size = static_cast<int64_t>(shards.size());
  check_shards(param, tp_size);
  if (param.split == TpSplit::kReplicated) return shards[0];
  if (is_fc1(param)) {
    const int64_t rows = config.intermediate_size / tp_size;
    std::vector<at::Tensor> pieces;
    for (int64_t half = 0; half < 2; ++half) {
      for (const at::Tensor& shard : shards) pieces.push_back(shard.narrow(0, half * rows, rows));
    }
    return at::cat(pieces, 0);
  }
  return at::cat(shards, megatron_split_dim(param.split));
}

void validate_parallel(const ModelConfig& config, int64_t tp_size, int64_t pp_size) {
  const char* tp = "tensor_model_parallel_size";
  check_divides("num_key_value_heads", config.num_key_value_heads, tp_size, tp);
  check_divides("num_attention_heads", config.num_attention_heads, tp_size, tp);
  check_divides("intermediate_size", config.intermediate_size, tp_size, tp);
  check_divides("vocab_size", config.vocab_size, tp_size, tp);
  if (pp_size < 1 || pp_size > config.num_hidden_layers) {
    throw ValueError("pipeline_model_parallel_size " + std::to_string(pp_size) +
                     " must be in [1, num_hidden_layers = " + std::to_string(config.num_hidden_layers) + "]");
  }
}

std::pair<int64_t, int64_t> pp_layer_range(int64_t num_layers, int64_t pp_rank, int64_t pp_size) {
  if (pp_size < 1 || pp_rank < 0 || pp_rank >= pp_size) {
    throw ValueError("pipeline rank " + std::to_string(pp_rank) + " is outside [0, " + std::to_string(pp_size) + ")");
  }
  const int64_t base = num_layers / pp_size;
  const int64_t extra = num_layers % pp_size;
  const int64_t begin = pp_rank * base + std::min(pp_rank, extra);
  return {begin, begin + base + (pp_rank < extra ? 1 : 0)};
}

}  // namespace rlcore::model::megatron
