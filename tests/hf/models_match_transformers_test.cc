// Hugging Face transformers is the authority for rlcore's models: a tiny random
// model of each supported family, written by transformers' save_pretrained,
// loads in rlcore and gives the same logits (fp32, 1e-5 relative to the largest),
// per-token log-probs and greedy tokens, with and without left padding.
#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rlcore/model/transformer.h"
#include "rlcore/safetensors/safetensors.h"

#include <catch2/catch.hpp>

#include "../common/reference_python.h"
#include "hf_testing.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace rlcore::model;

namespace {

struct FamilyCase {
  std::string name;  // for messages
  std::string family;
  json config;  // overrides of the reference script's tiny config
};

std::vector<FamilyCase> family_cases() {
  return {
      {"llama", "llama", json::object()},
      {"llama, biases, untied, llama3 rope",
       "llama",
       {{"attention_bias", true},
        {"mlp_bias", true},
        {"rope_parameters",
         {{"rope_type", "llama3"},
          {"rope_theta", 500000.0},
          {"factor", 8.0},
          {"low_freq_factor", 1.0},
          {"high_freq_factor", 4.0},
          {"original_max_position_embeddings", 16}}}}},
      {"llama, linear rope, tied",
       "llama",
       {{"tie_word_embeddings", true},
        {"rope_parameters", {{"rope_type", "linear"}, {"rope_theta", 10000.0}, {"factor", 4.0}}}}},
      {"qwen2, tied", "qwen2", {{"tie_word_embeddings", true}}},
      {"qwen2, yarn rope",
       "qwen2",
       {{"rope_parameters",
         {{"rope_type", "yarn"},
          {"rope_theta", 1000000.0},
          {"factor", 4.0},
          {"original_max_position_embeddings", 32}}}}},
      {"qwen3", "qwen3", {{"head_dim", 32}}},
      {"qwen3, yarn with mscale",
       "qwen3",
       {{"rope_parameters",
         {{"rope_type", "yarn"},
          {"rope_theta", 10000.0},
          {"factor", 8.0},
          {"mscale", 0.707},
          {"mscale_all_dim", 1.0},
          {"beta_fast", 16},
          {"original_max_position_embeddings", 64}}}}},
      // 4 experts of 48, 2 per token; then unnormalised weights and a dense middle layer.
      {"qwen3_moe",
       "qwen3_moe",
       {{"num_experts", 4}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 48}, {"norm_topk_prob", true}}},
      {"qwen3_moe, raw top-k weights, layer 1 dense",
       "qwen3_moe",
       {{"num_experts", 6},
        {"num_experts_per_tok", 3},
        {"moe_intermediate_size", 32},
        {"norm_topk_prob", false},
        {"mlp_only_layers", {1}}}},
      {"mixtral, 4 experts, 2 per token", "mixtral", {{"num_local_experts", 4}, {"num_experts_per_tok", 2}}},
      {"mixtral, sliding window 5, 3 of 5 experts",
       "mixtral",
       {{"sliding_window", 5}, {"num_local_experts", 5}, {"num_experts_per_tok", 3}}},
      // 8 experts in 4 groups (2 searched), 3 per token, a shared expert, layer 0 dense; latent
      // attention with a low-rank query, interleaved rope; then a plain q_proj, rope in halves, yarn
      // with mscale_all_dim (the softmax scale), raw weights, 2 shared experts and 3 groups searched of 4.
      {"deepseek_v3, q_lora_rank, interleaved rope", "deepseek_v3", hf_testing::deepseek_v3_config()},
      {"deepseek_v3, q_proj, yarn with mscale_all_dim", "deepseek_v3",
       hf_testing::deepseek_v3_config({{"q_lora_rank", nullptr},
                                       {"rope_interleave", false},
                                       {"norm_topk_prob", false},
                                       {"n_shared_experts", 2},
                                       {"topk_group", 3},
                                       {"num_experts_per_tok", 4},
                                       {"routed_scaling_factor", 1.5},
                                       {"rope_parameters",
                                        {{"rope_type", "yarn"},
                                         {"rope_theta", 10000.0},
                                         {"factor", 4.0},
                                         {"mscale", 0.9},
                                         {"mscale_all_dim", 0.8},
                                         {"original_max_position_embeddings", 64}}}})},
      {"mistral, sliding window 4", "mistral", {{"sliding_window", 4}}},
      {"mistral, no sliding window", "mistral", {{"sliding_window", nullptr}}},
      // Small caps so soft-capping bends the values; alternate layers slide.
      {"gemma2, soft-capping, sliding window 3 on even layers",
       "gemma2",
       {{"sliding_window", 3},
        {"attn_logit_softcapping", 0.5},
        {"final_logit_softcapping", 2.0},
        {"query_pre_attn_scalar", 24}}},
      {"gemma2, no caps, untied, custom layer types",
       "gemma2",
       {{"sliding_window", 5},
        {"attn_logit_softcapping", nullptr},
        {"final_logit_softcapping", nullptr},
        {"tie_word_embeddings", false},
        {"layer_types", {"full_attention", "sliding_attention", "sliding_attention"}}}},
  };
}

// Two rows of 11 tokens, the first left-padded by 4.
hf_testing::Inputs test_inputs() {
  return {{{0, 0, 0, 0, 5, 17, 33, 8, 61, 12, 90}, {3, 44, 5, 71, 7, 28, 9, 10, 55, 12, 2}},
          {{0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}}};
}

// Every sparse layer sends each real token to the experts transformers' router picks.
void check_experts_equal(const Transformer& model, const hf_testing::Inputs& inputs,
                         const hf_testing::Reference& reference) {
  const at::Tensor ids = inputs.ids_tensor();
  const at::Tensor mask = inputs.mask_tensor();
  ForwardContext ctx = model.prepare(ids, mask, {}, nullptr);
  MoeRouting routing;
  ctx.routing = &routing;
  (void)model.hidden_states(ids, ctx);
  std::vector<at::Tensor> sparse;
  for (const at::Tensor& chosen : routing.chosen) {
    if (chosen.defined()) sparse.push_back(std::get<0>(chosen.sort(-1)));
  }
  REQUIRE(sparse.size() == reference.experts.size());
  const at::Tensor real = mask.reshape(-1).to(at::kBool);
  int64_t compared = 0;
  for (size_t layer = 0; layer < sparse.size(); ++layer) {
    for (int64_t token = 0; token < real.size(0); ++token) {
      if (!real[token].item<bool>()) continue;
      const at::Tensor row = sparse[layer][token].contiguous();
      const std::vector<int64_t> ours(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel());
      INFO("sparse layer " << layer << ", position " << token);
      CHECK(ours == reference.experts[layer][static_cast<size_t>(token)]);
      ++compared;
    }
  }
  CHECK(compared > 0);
  // The router's load-balancing loss over the same forward (transformers' aux_loss; DeepSeek-V3 has none).
  if (model.config().model_type == "deepseek_v3") {
    CHECK_FALSE(reference.aux_loss.has_value());
    return;
  }
  REQUIRE(reference.aux_loss.has_value());
  const double aux = load_balancing_loss(routing, model.config().num_experts, mask).item<double>();
  CHECK(*reference.aux_loss > 0.5);
  CHECK(aux == Approx(*reference.aux_loss).epsilon(1e-5));
}

}  // namespace

TEST_CASE("every supported family equals transformers: logits, log-probs, greedy tokens", "[hf][models]") {
  const hf_testing::Inputs inputs = test_inputs();
  const int64_t new_tokens = 6;
  for (const FamilyCase& c : family_cases()) {
    SECTION(c.name) {
      const fs::path dir = hf_testing::scratch_dir("models_" + c.family);
      const hf_testing::Reference reference =
          hf_testing::make_reference_model(c.family, c.config, inputs, new_tokens, dir);
      const Transformer model = hf_testing::load_checkpoint(dir);
      CHECK(model.config().model_type == c.family);

      const at::Tensor ids = inputs.ids_tensor();
      const at::Tensor mask = inputs.mask_tensor();
      const at::Tensor logits = model.forward(ids, mask);
      const at::Tensor real = mask.to(at::kBool);
      // Padding outputs are arbitrary by design: compare real tokens only.
      CHECK(hf_testing::relative_error(logits.index({real}), reference.logits.index({real})) < 1e-5);
      CHECK(reference.max_abs_logit > 0.5);  // the comparison is not between near-zero tensors

      const at::Tensor logprobs =
          at::log_softmax(logits.slice(1, 0, -1), -1).gather(-1, ids.slice(1, 1).unsqueeze(-1)).squeeze(-1);
      const at::Tensor real_targets = real.slice(1, 1).logical_and(real.slice(1, 0, -1));
      CHECK(hf_testing::relative_error(logprobs.index({real_targets}), reference.logprobs.index({real_targets})) <
            1e-5);

      CHECK(hf_testing::greedy(model, ids, mask, new_tokens) == reference.greedy);
      if (model.config().is_moe()) check_experts_equal(model, inputs, reference);
      fs::remove_all(dir);
    }
  }
}

TEST_CASE("a checkpoint transformers shards with an index loads the same", "[hf][models]") {
  const hf_testing::Inputs inputs = test_inputs();
  const fs::path dir = hf_testing::scratch_dir("models_sharded");
  const hf_testing::Reference reference =
      hf_testing::make_reference_model("qwen3", {{"head_dim", 32}}, inputs, 2, dir, "60KB");
  REQUIRE(fs::exists(dir / "model.safetensors.index.json"));
  const rlcore::SafetensorsCheckpoint checkpoint(dir);
  CHECK(checkpoint.shards().size() > 2);
  const Transformer model = hf_testing::load_checkpoint(dir);
  const at::Tensor real = inputs.mask_tensor().to(at::kBool);
  CHECK(hf_testing::relative_error(model.forward(inputs.ids_tensor(), inputs.mask_tensor()).index({real}),
                                   reference.logits.index({real})) < 1e-5);
  fs::remove_all(dir);
}
