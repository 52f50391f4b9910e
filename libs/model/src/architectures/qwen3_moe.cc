// Qwen3-MoE (Qwen3MoeConfig): Qwen3 whose MLPs are sparse blocks, the router's
// weights cast to the hidden dtype.
#include <nlohmann/json.hpp>

#include "../config_json.h"
#include "architectures.h"

namespace rlcore::model {
namespace {

using namespace config_json;

void parse_qwen3_moe(const json& j, const std::string& source, ModelConfig& c) {
  // The Hub's configs say num_experts; transformers >= 5 writes num_local_experts.
  c.num_experts = find(j, "num_local_experts") != nullptr ? get_int(j, "num_local_experts", source)
                                                          : get_int(j, "num_experts", source, 128);
  c.num_experts_per_tok = get_int(j, "num_experts_per_tok", source, 8);
  c.moe_intermediate_size = get_int(j, "moe_intermediate_size", source, 768);
  c.norm_topk_prob = get_bool(j, "norm_topk_prob", source, false);
  c.decoder_sparse_step = get_int(j, "decoder_sparse_step", source, 1);
  if (find(j, "mlp_only_layers") != nullptr) c.mlp_only_layers = get_int_list(j, "mlp_only_layers", source);
  c.router_aux_loss_coef = get_double(j, "router_aux_loss_coef", source, 0.001);
}

void write_qwen3_moe(const ModelConfig& c, json& j) {
  write_qwen3_keys(c, j);
  j["num_experts"] = c.num_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["norm_topk_prob"] = c.norm_topk_prob;
  j["decoder_sparse_step"] = c.decoder_sparse_step;
  j["mlp_only_layers"] = c.mlp_only_layers;
  j["router_aux_loss_coef"] = c.router_aux_loss_coef;
  j["output_router_logits"] = false;
}

void set_qwen3_moe_preset(ModelConfig& c) {  // Qwen3-30B-A3B's shape, scaled: 8 experts of a quarter width, 2 per token
  set_qwen_preset(c);
  c.num_experts = 8;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = c.intermediate_size / 4;
  c.norm_topk_prob = true;
}

}  // namespace

Architecture qwen3_moe_architecture() {
  Architecture a = qwen3_architecture();
  a.model_type = "qwen3_moe";
  a.hf_class = "Qwen3Moe";
  a.layers.moe = true;
  a.layers.moe_style = MoeStyle::kQwen3Moe;
  a.parse = parse_qwen3_moe;
  a.write = write_qwen3_moe;
  a.preset = set_qwen3_moe_preset;
  return a;
}

}  // namespace rlcore::model
