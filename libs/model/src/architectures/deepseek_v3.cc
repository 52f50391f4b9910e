// DeepSeek-V3 (DeepseekV3Config's defaults): latent attention, group-limited
// sigmoid routing with shared experts, dense first layers. What the original
// DeepSeek configs say that HF does not implement either is refused by name.
#include <nlohmann/json.hpp>

#include "../config_json.h"
#include "architectures.h"

namespace rlcore::model {
namespace {

using namespace config_json;

void parse_deepseek_v3(const json& j, const std::string& source, ModelConfig& c) {
  // head_dim is read from qk_rope_head_dim (as HF sets it); a head_dim given beside it would size HF's rotary embedding
  // instead (and fail there).
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

void set_deepseek_v3_preset(ModelConfig& c) {
  c.rms_norm_eps = 1e-6;
  set_deepseek_v3_shape(c);
}

}  // namespace

Architecture deepseek_v3_architecture() {
  Architecture a{"deepseek_v3", "DeepseekV3"};
  a.head_dim_key = "qk_rope_head_dim";
  a.default_head_dim = 64;
  a.default_max_position_embeddings = 4096;
  a.layers.moe = true;
  a.layers.moe_style = MoeStyle::kDeepseekV3;
  a.layers.latent_attention = true;
  a.multi_token_prediction_layers = true;
  a.parse = parse_deepseek_v3;
  a.validate = validate_deepseek_v3;
  a.write = write_deepseek_v3;
  a.preset = set_deepseek_v3_preset;
  return a;
}

}  // namespace rlcore::model
