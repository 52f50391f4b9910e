// Mixtral (MixtralConfig): Mistral whose every MLP is a sparse block of experts
// of intermediate_size, weighted in fp32 and named block_sparse_moe (w1, w3, w2).
#include <nlohmann/json.hpp>

#include "../config_json.h"
#include "architectures.h"

namespace rlcore::model {
namespace {

using namespace config_json;

void parse_mixtral(const json& j, const std::string& source, ModelConfig& c) {
  read_mistral_sliding_window(j, source, std::nullopt, c);
  c.num_experts = get_int(j, "num_local_experts", source, 8);
  c.num_experts_per_tok = get_int(j, "num_experts_per_tok", source, 2);
  c.moe_intermediate_size = c.intermediate_size;
  c.norm_topk_prob = true;
  c.router_aux_loss_coef = get_double(j, "router_aux_loss_coef", source, 0.001);
  if (get_double(j, "router_jitter_noise", source, 0.0) != 0.0) {
    fail(source, "router_jitter_noise", "is not supported (it perturbs the router's input in training); use 0");
  }
}

void validate_mixtral(const ModelConfig& c, const std::string& source) {
  if (c.moe_intermediate_size != c.intermediate_size || !c.norm_topk_prob || c.decoder_sparse_step != 1 ||
      !c.mlp_only_layers.empty()) {
    fail(source, "num_local_experts", "mixtral's experts are every layer's, of intermediate_size, renormalised");
  }
}

void write_mixtral(const ModelConfig& c, json& j) {
  write_mistral_keys(c, j);
  j["num_local_experts"] = c.num_experts;
  j["num_experts_per_tok"] = c.num_experts_per_tok;
  j["router_aux_loss_coef"] = c.router_aux_loss_coef;
  j["router_jitter_noise"] = 0.0;
  j["output_router_logits"] = false;
}

}  // namespace

Architecture mixtral_architecture() {
  Architecture a = mistral_architecture();
  a.model_type = "mixtral";
  a.hf_class = "Mixtral";
  a.layers.moe = true;
  a.layers.moe_style = MoeStyle::kMixtral;
  a.hf_moe_names = {"block_sparse_moe", "w1", "w3", "w2"};
  a.parse = parse_mixtral;
  a.validate = validate_mixtral;
  a.write = write_mixtral;
  return a;
}

}  // namespace rlcore::model
