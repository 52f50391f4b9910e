// The megatron weight adaptor: every rollout tensor of a qwen2 model (several
// query groups, q/k/v biases) is cut out of its fused Megatron source and
// re-sliced to the rollout's TP shard bit-exactly, in fp32 and bf16.
#include <ATen/ATen.h>

#include <map>

#include "megatron_adaptor.h"
#include "rlcore/error.h"
#include "rlcore/model/megatron_layout.h"
#include "rlcore/model/tensor_parallel.h"
#include "rlcore/model/transformer.h"

#include <catch2/catch.hpp>
#include "../../common/error_of.h"

using namespace rlcore;
using rlcore_test::error_of;

namespace {

model::ModelConfig qwen2_config() {
  model::ModelConfig c = model::preset("qwen2", "tiny", 64);
  c.hidden_size = 32;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.head_dim = 4;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.tie_word_embeddings = false;
  c.validate("adaptor test");
  return c;
}

}  // namespace

TEST_CASE("the megatron adaptor rebuilds every HF rollout tensor from its fused source, TP-sliced",
          "[hybrid][adaptor][megatron]") {
  const model::ModelConfig config = qwen2_config();
  std::map<std::string, at::Tensor> hf;
  at::manual_seed(3);
  for (const auto& spec : model::parameter_specs(config, model::ModelHead::kCausalLm))
    hf[spec.name] = at::randn(spec.shape);
  std::map<std::string, at::Tensor> fused;
  for (const auto& param : model::megatron::megatron_parameters(config)) {
    std::vector<at::Tensor> sources;
    for (const auto& name : model::megatron::hf_sources(config, param.name)) sources.push_back(hf.at(name));
    fused[param.name] = model::megatron::from_hf(config, param.name, sources);
  }
  const hybrid_engine::MegatronAdaptor adaptor(config);
  for (int64_t tp : {1, 2}) {
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      for (int64_t rank = 0; rank < tp; ++rank) {
        RolloutLayout layout;
        layout.tp_size = tp;
        layout.tp_rank = rank;
        for (const auto& [name, full] : hf) {
          INFO(name << " tp " << tp << " rank " << rank << " " << dtype);
          const WeightMeta target{name, model::tp_shard_shape(name, full.sizes(), tp), dtype};
          const auto sources = adaptor.sources(target, layout);
          REQUIRE(sources.size() == 1);
          at::Tensor out = at::empty(target.shape, dtype);
          adaptor.convert(target, layout, {fused.at(sources[0])}, out);
          CHECK(at::equal(out, model::tp_slice(name, full, rank, tp).to(dtype)));
        }
      }
    }
  }
  RolloutLayout two;
  two.tp_size = 2;
  const WeightMeta wrong{"model.layers.0.self_attn.k_proj.weight", {16, 32}, at::kFloat};
  at::Tensor out = at::empty({16, 32});
  CHECK_THAT(error_of<ValueError>([&] {
               adaptor.convert(wrong, two, {fused.at("decoder.layers.0.self_attention.linear_qkv.weight")}, out);
             }),
             Catch::Contains("k_proj") && Catch::Contains("linear_qkv"));
}

TEST_CASE("the megatron adaptor rebuilds a mixture of experts' router and every expert from Megatron names",
          "[hybrid][adaptor][megatron][moe]") {
  model::ModelConfig config = model::preset("qwen3_moe", "tiny", 64);
  config.hidden_size = 32;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.head_dim = 8;
  config.intermediate_size = 32;
  config.moe_intermediate_size = 8;
  config.num_experts = 4;
  config.num_hidden_layers = 2;
  config.validate("adaptor moe test");
  std::map<std::string, at::Tensor> hf;
  at::manual_seed(5);
  for (const auto& spec : model::parameter_specs(config, model::ModelHead::kCausalLm))
    hf[spec.name] = at::randn(spec.shape);
  // What an expert-parallel engine visits: every expert under its global name, whichever ep rank held it.
  std::map<std::string, at::Tensor> fused;
  for (const auto& param : model::megatron::megatron_parameters(config)) {
    std::vector<at::Tensor> sources;
    for (const auto& name : model::megatron::hf_sources(config, param.name)) sources.push_back(hf.at(name));
    fused[param.name] = model::megatron::from_hf(config, param.name, sources);
  }
  CHECK(fused.count("decoder.layers.1.mlp.experts.local_experts.3.linear_fc2.weight") == 1);
  const hybrid_engine::MegatronAdaptor adaptor(config);
  RolloutLayout layout;
  int64_t experts = 0;
  for (const auto& [name, full] : hf) {
    INFO(name);
    const WeightMeta target{name, full.sizes().vec(), at::kFloat};
    const auto sources = adaptor.sources(target, layout);
    REQUIRE(sources.size() == 1);
    at::Tensor out = at::empty(target.shape);
    adaptor.convert(target, layout, {fused.at(sources[0])}, out);
    CHECK(at::equal(out, full));
    experts += name.find(".experts.") != std::string::npos;
  }
  CHECK(experts == 2 * 4 * 3);  // layers x experts x (gate, up, down)
  CHECK(adaptor.sources({"model.layers.0.mlp.gate.weight", {4, 32}, at::kFloat}, layout) ==
        std::vector<std::string>{"decoder.layers.0.mlp.router.weight"});
}

TEST_CASE("the megatron adaptor rebuilds DeepSeek-V3's latent attention, router bias and shared experts",
          "[hybrid][adaptor][megatron][moe]") {
  const model::ModelConfig config = model::preset("deepseek_v3", "tiny", 64);
  std::map<std::string, at::Tensor> hf;
  at::manual_seed(6);
  for (const auto& spec : model::parameter_specs(config, model::ModelHead::kCausalLm))
    hf[spec.name] = at::randn(spec.shape);
  std::map<std::string, at::Tensor> fused;
  for (const auto& param : model::megatron::megatron_parameters(config)) {
    std::vector<at::Tensor> sources;
    for (const auto& name : model::megatron::hf_sources(config, param.name)) sources.push_back(hf.at(name));
    fused[param.name] = model::megatron::from_hf(config, param.name, sources);
  }
  const hybrid_engine::MegatronAdaptor adaptor(config);
  RolloutLayout layout;
  for (const auto& [name, full] : hf) {
    INFO(name);
    const WeightMeta target{name, full.sizes().vec(), at::kFloat};
    const auto sources = adaptor.sources(target, layout);
    REQUIRE(sources.size() == 1);
    at::Tensor out = at::empty(target.shape);
    adaptor.convert(target, layout, {fused.at(sources[0])}, out);
    CHECK(at::equal(out, full));
  }
  CHECK(adaptor.sources({"model.layers.1.self_attn.kv_b_proj.weight", {}, at::kFloat}, layout) ==
        std::vector<std::string>{"decoder.layers.1.self_attention.linear_kv_up_proj.weight"});
  CHECK(adaptor.sources({"model.layers.1.mlp.gate.e_score_correction_bias", {}, at::kFloat}, layout) ==
        std::vector<std::string>{"decoder.layers.1.mlp.router.expert_bias"});
}
