// The Megatron layout: every HF tensor has exactly one place, conversions
// round-trip bit-exactly, q/k/v are grouped per query group as Megatron-core
// lays them out, TP shards follow Megatron's per-rank fusion, and bad names
// or sizes are errors that name them.
#include <ATen/ATen.h>

#include <map>
#include <set>

#include "rlcore/error.h"
#include "rlcore/model/megatron_layout.h"
#include "rlcore/model/transformer.h"

#include <catch2/catch.hpp>
#include "../../common/error_of.h"
#include "full_featured_config.h"

using namespace rlcore::model;
using rlcore_test::error_of;

namespace {

// 8 query heads in 4 groups of head_dim 4, over 3 layers.
ModelConfig megatron_config(const std::string& arch) { return rlcore_test::full_featured(arch, {8, 4, 4, 3}); }

// Distinct values everywhere, so any misplaced element shows.
std::map<std::string, at::Tensor> random_hf(const ModelConfig& config) {
  std::map<std::string, at::Tensor> tensors;
  int64_t seed = 0;
  for (const ParameterSpec& spec : parameter_specs(config, ModelHead::kCausalLm)) {
    at::manual_seed(++seed);
    tensors[spec.name] = at::randn(spec.shape);
  }
  return tensors;
}

std::map<std::string, at::Tensor> to_megatron(const ModelConfig& config, const std::map<std::string, at::Tensor>& hf) {
  std::map<std::string, at::Tensor> out;
  for (const megatron::MegatronParam& param : megatron::megatron_parameters(config)) {
    std::vector<at::Tensor> sources;
    for (const std::string& name : megatron::hf_sources(config, param.name)) sources.push_back(hf.at(name));
    out[param.name] = megatron::from_hf(config, param.name, sources);
    CHECK(out[param.name].sizes() == at::IntArrayRef(param.shape));
  }
  return out;
}

// A mixture of experts with a dense layer among its sparse ones: qwen3_moe, or
// Mixtral's names (block_sparse_moe, w1/w3/w2).
ModelConfig moe_config(const std::string& arch) {
  ModelConfig c = rlcore_test::full_featured("qwen3_moe", {8, 4, 4, 3});
  c.num_experts = 4;
  c.moe_intermediate_size = 12;
  c.mlp_only_layers = {1};
  if (arch == "mixtral") {
    c.model_type = "mixtral";
    c.qk_norm = c.qkv_bias = c.o_proj_bias = c.mlp_bias = false;
    c.mlp_only_layers.clear();
    c.moe_intermediate_size = c.intermediate_size;
  }
  c.validate("megatron moe test");
  return c;
}

}  // namespace

TEST_CASE("megatron layout: a mixture of experts' router and experts have Megatron-core's names",
          "[model][megatron][moe]") {
  for (const std::string arch : {"qwen3_moe", "mixtral"}) {
    INFO(arch);
    const ModelConfig config = moe_config(arch);
    std::multiset<std::string> covered, expected;
    int64_t experts = 0;
    for (const megatron::MegatronParam& param : megatron::megatron_parameters(config)) {
      for (const std::string& name : megatron::hf_sources(config, param.name)) {
        covered.insert(name);
        CHECK(megatron::megatron_source(config, name) == param.name);
      }
      CHECK(param.split ==
            (param.expert >= 0 || param.name.find("router") != std::string::npos ? TpSplit::kReplicated : param.split));
      if (param.expert >= 0) ++experts;
    }
    for (const ParameterSpec& spec : parameter_specs(config, ModelHead::kCausalLm)) expected.insert(spec.name);
    CHECK(covered == expected);
    const int64_t sparse_layers = arch == "mixtral" ? 3 : 2;
    CHECK(experts == sparse_layers * config.num_experts * 2);
    const std::string block = arch == "mixtral" ? "block_sparse_moe" : "mlp";
    const std::string up = arch == "mixtral" ? "w3" : "up_proj";
    CHECK(megatron::hf_sources(config, "decoder.layers.2.mlp.router.weight") ==
          std::vector<std::string>{"model.layers.2." + block + ".gate.weight"});
    const megatron::MegatronParam fc1 =
        megatron::megatron_parameter(config, "decoder.layers.2.mlp.experts.local_experts.3.linear_fc1.weight");
    CHECK(fc1.expert == 3);
    CHECK(fc1.shape == std::vector<int64_t>{2 * config.moe_intermediate_size, config.hidden_size});
    CHECK(megatron::hf_sources(config, fc1.name)[1] == "model.layers.2." + block + ".experts.3." + up + ".weight");
    // HF -> Megatron -> HF is bit-exact, the experts' [gate; up] included.
    const auto hf = random_hf(config);
    const auto fused = to_megatron(config, hf);
    for (const auto& [name, tensor] : hf) {
      INFO(name);
      CHECK(at::equal(megatron::to_hf(config, name, fused.at(megatron::megatron_source(config, name))), tensor));
    }
    CHECK_THAT(error_of<rlcore::ValueError>([&] {
                 megatron::megatron_parameter(config, "decoder.layers.2.mlp.experts.local_experts.4.linear_fc1.weight");
               }),
               Catch::Contains("local_experts.4") && Catch::Contains("4 experts"));
  }
  // The dense layer of qwen3_moe keeps linear_fc1; a sparse one has none.
  const ModelConfig config = moe_config("qwen3_moe");
  CHECK(megatron::megatron_parameter(config, "decoder.layers.1.mlp.linear_fc1.weight").layer == 1);
  CHECK_THROWS_AS(megatron::megatron_parameter(config, "decoder.layers.0.mlp.linear_fc1.weight"), rlcore::ValueError);
}

TEST_CASE("megatron layout: every HF tensor lives in exactly one Megatron parameter", "[model][megatron]") {
  for (const std::string arch : {"llama", "qwen2", "qwen3"}) {
    INFO(arch);
    for (bool tied : {false, true}) {
      ModelConfig config = megatron_config(arch);
      config.tie_word_embeddings = tied;
      std::multiset<std::string> covered;
      int64_t megatron_numel = 0;
      for (const megatron::MegatronParam& param : megatron::megatron_parameters(config)) {
        int64_t numel = 1;
        for (int64_t d : param.shape) numel *= d;
        megatron_numel += numel;
        for (const std::string& name : megatron::hf_sources(config, param.name)) {
          covered.insert(name);
          CHECK(megatron::megatron_source(config, name) == param.name);
        }
      }
      std::multiset<std::string> expected;
      for (const ParameterSpec& spec : parameter_specs(config, ModelHead::kCausalLm)) expected.insert(spec.name);
      CHECK(covered == expected);
      CHECK(megatron_numel == num_parameters(config, ModelHead::kCausalLm));
      CHECK(megatron::megatron_parameters(config).back().name ==
            (tied ? "decoder.final_layernorm.weight" : "output_layer.weight"));
    }
  }
}

TEST_CASE("megatron layout: HF -> Megatron -> HF is bit-exact", "[model][megatron]") {
  for (const std::string arch : {"llama", "qwen2", "qwen3"}) {
    INFO(arch);
    const ModelConfig config = megatron_config(arch);
    const auto hf = random_hf(config);
    const auto megatron = to_megatron(config, hf);
    for (const auto& [name, tensor] : hf) {
      INFO(name);
      const at::Tensor back = megatron::to_hf(config, name, megatron.at(megatron::megatron_source(config, name)));
      CHECK(at::equal(back, tensor));
    }
  }
}

TEST_CASE("megatron layout: linear_qkv groups q heads, then k, then v, per query group", "[model][megatron]") {
  const ModelConfig config = megatron_config("qwen2");  // 8 q heads, 4 groups, head_dim 4
  const auto hf = random_hf(config);
  const at::Tensor qkv = to_megatron(config, hf).at("decoder.layers.1.self_attention.linear_qkv.weight");
  const at::Tensor q = hf.at("model.layers.1.self_attn.q_proj.weight");
  const at::Tensor k = hf.at("model.layers.1.self_attn.k_proj.weight");
  const at::Tensor v = hf.at("model.layers.1.self_attn.v_proj.weight");
  const int64_t d = config.head_dim, per = 2;
  for (int64_t g = 0; g < config.num_key_value_heads; ++g) {
    const int64_t base = g * (per + 2) * d;
    CHECK(at::equal(qkv.narrow(0, base, per * d), q.narrow(0, g * per * d, per * d)));
    CHECK(at::equal(qkv.narrow(0, base + per * d, d), k.narrow(0, g * d, d)));
    CHECK(at::equal(qkv.narrow(0, base + (per + 1) * d, d), v.narrow(0, g * d, d)));
  }
  const at::Tensor fc1 = to_megatron(config, hf).at("decoder.layers.1.mlp.linear_fc1.weight");
  CHECK(at::equal(fc1,
                  at::cat({hf.at("model.layers.1.mlp.gate_proj.weight"), hf.at("model.layers.1.mlp.up_proj.weight")})));
}

TEST_CASE("megatron layout: TP shards are whole query groups and [gate; up] per rank, and merge back",
          "[model][megatron]") {
  const ModelConfig config = megatron_config("llama");
  const auto hf = random_hf(config);
  const auto megatron = to_megatron(config, hf);
  for (int64_t tp : {1, 2, 4}) {
    INFO("tp " << tp);
    for (const megatron::MegatronParam& param : megatron::megatron_parameters(config)) {
      INFO(param.name);
      const at::Tensor& full = megatron.at(param.name);
      std::vector<at::Tensor> shards;
      for (int64_t r = 0; r < tp; ++r) shards.push_back(megatron::tp_shard(config, param, full, r, tp).clone());
      CHECK(at::equal(megatron::merge_tp_shards(config, param, shards), full));
    }
  }
  // Rank 1 of 2 holds groups 2..3 of layer 0's qkv and channels 24..47 of gate, then of up.
  const auto qkv = megatron::megatron_parameter(config, "decoder.layers.0.self_attention.linear_qkv.weight");
  const at::Tensor shard = megatron::tp_shard(config, qkv, megatron.at(qkv.name), 1, 2);
  const at::Tensor k_group2 = hf.at("model.layers.0.self_attn.k_proj.weight").narrow(0, 2 * 4, 4);
  CHECK(at::equal(shard.narrow(0, 2 * 4, 4), k_group2));
  const auto fc1 = megatron::megatron_parameter(config, "decoder.layers.0.mlp.linear_fc1.weight");
  const at::Tensor fc1_shard = megatron::tp_shard(config, fc1, megatron.at(fc1.name), 1, 2);
  CHECK(at::equal(fc1_shard.narrow(0, 0, 24), hf.at("model.layers.0.mlp.gate_proj.weight").narrow(0, 24, 24)));
  CHECK(at::equal(fc1_shard.narrow(0, 24, 24), hf.at("model.layers.0.mlp.up_proj.weight").narrow(0, 24, 24)));
  const auto proj = megatron::megatron_parameter(config, "decoder.layers.0.self_attention.linear_proj.weight");
  CHECK(proj.split == TpSplit::kRow);
  CHECK(megatron::tp_shard(config, proj, megatron.at(proj.name), 0, 2).sizes() == at::IntArrayRef({32, 16}));
}

TEST_CASE("megatron layout: pipeline stages split the layers evenly, the first ones take the rest",
          "[model][megatron]") {
  CHECK(megatron::pp_layer_range(4, 0, 2) == std::make_pair<int64_t, int64_t>(0, 2));
  CHECK(megatron::pp_layer_range(4, 1, 2) == std::make_pair<int64_t, int64_t>(2, 4));
  CHECK(megatron::pp_layer_range(5, 0, 2) == std::make_pair<int64_t, int64_t>(0, 3));
  CHECK(megatron::pp_layer_range(5, 1, 2) == std::make_pair<int64_t, int64_t>(3, 5));
  CHECK(megatron::pp_layer_range(3, 2, 3) == std::make_pair<int64_t, int64_t>(2, 3));
  CHECK_THROWS_AS(megatron::pp_layer_range(4, 2, 2), rlcore::ValueError);
}

TEST_CASE("megatron layout: bad names and sizes are errors naming them", "[model][megatron]") {
  const ModelConfig config = megatron_config("llama");
  CHECK_THAT(
      error_of<rlcore::ValueError>([&] { megatron::hf_sources(config, "decoder.layers.9.mlp.linear_fc1.weight"); }),
      Catch::Contains("decoder.layers.9.mlp.linear_fc1.weight"));
  CHECK_THAT(error_of<rlcore::ValueError>(
                 [&] { megatron::megatron_source(config, "model.layers.0.self_attn.q_norm.weight"); }),
             Catch::Contains("model.layers.0.self_attn.q_norm.weight"));
  CHECK_THAT(error_of<rlcore::ValueError>([&] { megatron::validate_parallel(config, 3, 1); }),
             Catch::Contains("tensor_model_parallel_size 3") && Catch::Contains("num_key_value_heads"));
  CHECK_THAT(error_of<rlcore::ValueError>([&] { megatron::validate_parallel(config, 1, 4); }),
             Catch::Contains("pipeline_model_parallel_size 4"));
  const auto fc2 = megatron::megatron_parameter(config, "decoder.layers.0.mlp.linear_fc2.weight");
  CHECK_THAT(error_of<rlcore::ValueError>([&] { megatron::tp_shard(config, fc2, at::zeros(fc2.shape), 0, 5); }),
             Catch::Contains("linear_fc2.weight") && Catch::Contains("5 ways"));
  CHECK_THROWS_AS(megatron::from_hf(config, "decoder.final_layernorm.weight", {}), rlcore::ValueError);
}

TEST_CASE("megatron layout: DeepSeek-V3's latent attention, router bias and shared experts round-trip bit-exactly",
          "[model][megatron][moe]") {
  for (bool q_lora : {true, false}) {
    INFO("q_lora " << q_lora);
    ModelConfig config = preset("deepseek_v3", "tiny", 64);
    if (!q_lora) config.q_lora_rank.reset();
    config.validate("megatron deepseek test");
    std::multiset<std::string> covered, expected;
    int64_t megatron_numel = 0;
    for (const megatron::MegatronParam& param : megatron::megatron_parameters(config)) {
      int64_t numel = 1;
      for (int64_t d : param.shape) numel *= d;
      megatron_numel += numel;
      for (const std::string& name : megatron::hf_sources(config, param.name)) {
        covered.insert(name);
        CHECK(megatron::megatron_source(config, name) == param.name);
      }
    }
    for (const ParameterSpec& spec : parameter_specs(config, ModelHead::kCausalLm)) expected.insert(spec.name);
    CHECK(covered == expected);
    CHECK(megatron_numel == num_parameters(config, ModelHead::kCausalLm));
    const std::string attn = "decoder.layers.1.self_attention.";
    if (q_lora) {
      CHECK(megatron::hf_sources(config, attn + "linear_q_down_proj.weight") ==
            std::vector<std::string>{"model.layers.1.self_attn.q_a_proj.weight"});
      CHECK(megatron::hf_sources(config, attn + "q_layernorm.weight") ==
            std::vector<std::string>{"model.layers.1.self_attn.q_a_layernorm.weight"});
      CHECK(megatron::megatron_parameter(config, attn + "linear_q_up_proj.weight").split == TpSplit::kColumn);
      CHECK_THROWS_AS(megatron::megatron_parameter(config, attn + "linear_q_proj.weight"), rlcore::ValueError);
    } else {
      CHECK(megatron::hf_sources(config, attn + "linear_q_proj.weight") ==
            std::vector<std::string>{"model.layers.1.self_attn.q_proj.weight"});
    }
    CHECK(megatron::hf_sources(config, attn + "kv_layernorm.weight") ==
          std::vector<std::string>{"model.layers.1.self_attn.kv_a_layernorm.weight"});
    CHECK(megatron::megatron_parameter(config, attn + "linear_kv_down_proj.weight").split == TpSplit::kReplicated);
    CHECK(megatron::megatron_parameter(config, attn + "linear_kv_up_proj.weight").split == TpSplit::kColumn);
    CHECK(megatron::hf_sources(config, "decoder.layers.1.mlp.router.expert_bias") ==
          std::vector<std::string>{"model.layers.1.mlp.gate.e_score_correction_bias"});
    CHECK(megatron::hf_sources(config, "decoder.layers.1.mlp.shared_experts.linear_fc1.weight") ==
          std::vector<std::string>{"model.layers.1.mlp.shared_experts.gate_proj.weight",
                                   "model.layers.1.mlp.shared_experts.up_proj.weight"});
    // The first first_k_dense_replace layers are dense.
    CHECK(megatron::megatron_parameter(config, "decoder.layers.0.mlp.linear_fc1.weight").layer == 0);
    CHECK_THROWS_AS(megatron::megatron_parameter(config, "decoder.layers.0.mlp.router.expert_bias"),
                    rlcore::ValueError);
    const auto hf = random_hf(config);
    const auto fused = to_megatron(config, hf);
    for (const auto& [name, tensor] : hf) {
      INFO(name);
      CHECK(at::equal(megatron::to_hf(config, name, fused.at(megatron::megatron_source(config, name))), tensor));
    }
    // TP shards are whole heads of the up projections and merge back.
    megatron::validate_parallel(config, 2, 2);
    for (const megatron::MegatronParam& param : megatron::megatron_parameters(config)) {
      INFO(param.name);
      std::vector<at::Tensor> shards;
      for (int64_t r = 0; r < 2; ++r) shards.push_back(megatron::tp_shard(config, param, fused.at(param.name), r, 2));
      CHECK(at::equal(megatron::merge_tp_shards(config, param, shards), fused.at(param.name)));
    }
    const auto kv_up = megatron::megatron_parameter(config, attn + "linear_kv_up_proj.weight");
    const int64_t head_rows = config.qk_nope_head_dim + config.v_head_dim;
    const int64_t half = config.num_attention_heads / 2;
    CHECK(at::equal(megatron::tp_shard(config, kv_up, fused.at(kv_up.name), 1, 2),
                    hf.at("model.layers.1.self_attn.kv_b_proj.weight").narrow(0, half * head_rows, half * head_rows)));
  }
}
