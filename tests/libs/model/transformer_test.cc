// Transformer: HF parameter layout, loading, and forward equivalences (KV cache
// vs full sequence, left padding vs unbatched, GQA vs MHA, row removal, bf16).
// Equality with Hugging Face transformers itself is tests/hf/'s.
#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include "rlcore/error.h"
#include "rlcore/model/transformer.h"

#include <catch2/catch.hpp>

using namespace rlcore::model;
using rlcore::ValueError;

namespace {

constexpr int64_t kVocab = 97;

// Small enough for milliseconds, large enough for GQA (4 heads / 2 kv heads).
ModelConfig tiny(const std::string& arch) {
  ModelConfig c = preset(arch, "tiny", kVocab);
  c.hidden_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = arch == "qwen3" ? 32 : 16;  // qwen3: head_dim != hidden / heads, as in real Qwen3
  c.intermediate_size = 96;
  c.tie_word_embeddings = arch == "qwen2";
  return c;
}

// llama with every optional feature: biases everywhere and llama3 rope scaling.
ModelConfig tiny_llama_full() {
  ModelConfig c = tiny("llama");
  c.qkv_bias = c.o_proj_bias = c.mlp_bias = true;
  c.rope_scaling = RopeScaling{"llama3", 8.0, 1.0, 4.0, 64};
  return c;
}

// N(0, 0.1) weights, norms 1 + N(0, 0.1), biases N(0, 0.1): larger than HF's
// init so every term (norm weights, biases) visibly moves the logits.
NamedTensors random_weights(const Transformer& model, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  NamedTensors out;
  for (const auto& [name, param] : model.named_parameters()) {
    at::Tensor value = at::randn(param.sizes(), gen).mul(0.1);
    if (name.find("norm.weight") != std::string::npos) value = value.add(1.0);
    out.emplace_back(name, value);
  }
  return out;
}

Transformer make_model(const ModelConfig& c, uint64_t seed = 1, ModelHead head = ModelHead::kCausalLm,
                       at::ScalarType dtype = at::kFloat) {
  Transformer model(c, head, at::TensorOptions().dtype(dtype));
  model.load(random_weights(Transformer(c, head), seed));
  return model;
}

at::Tensor random_ids(int64_t batch, int64_t len, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randint(1, kVocab, {batch, len}, gen, at::kLong);
}

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  return a.to(at::kFloat).sub(b.to(at::kFloat)).abs().max().item<double>();
}

std::map<std::string, std::vector<int64_t>> spec_map(const ModelConfig& c, ModelHead head = ModelHead::kCausalLm) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const ParameterSpec& spec : parameter_specs(c, head)) out[spec.name] = spec.shape;
  return out;
}

using Shape = std::vector<int64_t>;

std::string load_error(Transformer& model, const NamedTensors& tensors, LoadMode mode = LoadMode::kStrict) {
  try {
    model.load(tensors, mode);
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

const char* const kArchs[] = {"llama", "qwen2", "qwen3"};

// DeepSeek-V3: latent attention whose key (8 + 16) and value (12) heads differ
// in width, a low-rank query, group-limited routing, layer 0 dense.
ModelConfig tiny_deepseek_v3() {
  ModelConfig c = preset("deepseek_v3", "tiny", kVocab);
  c.hidden_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = c.num_key_value_heads = 4;
  c.head_dim = 8;
  c.qk_nope_head_dim = 16;
  c.v_head_dim = 12;
  c.kv_lora_rank = 32;
  c.q_lora_rank = 48;
  c.intermediate_size = 96;
  c.moe_intermediate_size = 24;
  return c;
}

std::vector<ModelConfig> all_variants() {
  return {tiny("llama"), tiny_llama_full(), tiny("qwen2"), tiny("qwen3"), tiny_deepseek_v3()};
}

}  // namespace

TEST_CASE("parameter names and shapes follow HF per arch", "[model]") {
  const auto llama = spec_map(tiny("llama"));
  CHECK(llama.size() == 1 + 2 * 9 + 1 + 1);
  CHECK(llama.at("model.embed_tokens.weight") == Shape({kVocab, 64}));
  CHECK(llama.at("model.layers.1.input_layernorm.weight") == Shape({64}));
  CHECK(llama.at("model.layers.1.self_attn.q_proj.weight") == Shape({64, 64}));
  CHECK(llama.at("model.layers.1.self_attn.k_proj.weight") == Shape({32, 64}));
  CHECK(llama.at("model.layers.1.self_attn.v_proj.weight") == Shape({32, 64}));
  CHECK(llama.at("model.layers.1.self_attn.o_proj.weight") == Shape({64, 64}));
  CHECK(llama.at("model.layers.1.post_attention_layernorm.weight") == Shape({64}));
  CHECK(llama.at("model.layers.1.mlp.gate_proj.weight") == Shape({96, 64}));
  CHECK(llama.at("model.layers.1.mlp.up_proj.weight") == Shape({96, 64}));
  CHECK(llama.at("model.layers.1.mlp.down_proj.weight") == Shape({64, 96}));
  CHECK(llama.at("model.norm.weight") == Shape({64}));
  CHECK(llama.at("lm_head.weight") == Shape({kVocab, 64}));
  CHECK(llama.count("model.layers.0.self_attn.q_proj.bias") == 0);

  const auto llama_full = spec_map(tiny_llama_full());
  CHECK(llama_full.at("model.layers.0.self_attn.o_proj.bias") == Shape({64}));
  CHECK(llama_full.at("model.layers.0.mlp.down_proj.bias") == Shape({64}));

  const auto qwen2 = spec_map(tiny("qwen2"));  // tied
  CHECK(qwen2.size() == 1 + 2 * 12 + 1);
  CHECK(qwen2.count("lm_head.weight") == 0);
  CHECK(qwen2.at("model.layers.0.self_attn.q_proj.bias") == Shape({64}));
  CHECK(qwen2.at("model.layers.0.self_attn.k_proj.bias") == Shape({32}));
  CHECK(qwen2.at("model.layers.0.self_attn.v_proj.bias") == Shape({32}));
  CHECK(qwen2.count("model.layers.0.self_attn.o_proj.bias") == 0);

  const auto qwen3 = spec_map(tiny("qwen3"));
  CHECK(qwen3.size() == 1 + 2 * 11 + 1 + 1);
  CHECK(qwen3.at("model.layers.0.self_attn.q_norm.weight") == Shape({32}));
  CHECK(qwen3.at("model.layers.0.self_attn.k_norm.weight") == Shape({32}));
  CHECK(qwen3.at("model.layers.0.self_attn.q_proj.weight") == Shape({128, 64}));
  CHECK(qwen3.at("model.layers.0.self_attn.k_proj.weight") == Shape({64, 64}));
  CHECK(qwen3.at("model.layers.0.self_attn.o_proj.weight") == Shape({64, 128}));
  CHECK(qwen3.count("model.layers.0.self_attn.q_proj.bias") == 0);

  const auto critic = spec_map(tiny("qwen2"), ModelHead::kValue);
  CHECK(critic.at("score.weight") == Shape({1, 64}));
  CHECK(critic.at("score.bias") == Shape({1}));
  CHECK(critic.count("lm_head.weight") == 0);

  // named_parameters() lists the live tensors in parameter_specs order.
  for (const char* arch : kArchs) {
    const Transformer model(tiny(arch));
    const NamedTensors named = model.named_parameters();
    const std::vector<ParameterSpec> specs = parameter_specs(tiny(arch));
    REQUIRE(named.size() == specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      CHECK(named[i].first == specs[i].name);
      CHECK(named[i].second.sizes().vec() == specs[i].shape);
    }
  }
}

TEST_CASE("presets have the documented parameter counts", "[model]") {
  CHECK(num_parameters(preset("llama", "tiny", 1000)) == Approx(1.0e6).epsilon(0.15));
  CHECK(num_parameters(preset("qwen2", "100m", 32000)) == Approx(1.0e8).epsilon(0.1));
  CHECK(num_parameters(preset("qwen3", "1b", 32000)) == Approx(1.0e9).epsilon(0.1));
  // Embeddings count once when tied, twice when not.
  ModelConfig untied = preset("llama", "tiny", 1000);
  untied.tie_word_embeddings = false;
  CHECK(num_parameters(untied) - num_parameters(preset("llama", "tiny", 1000)) == 1000 * 128);
}

TEST_CASE("init_random is seeded and HF-like", "[model]") {
  ModelConfig c = tiny("qwen2");
  c.num_hidden_layers = 1;
  c.pad_token_id = 0;
  Transformer a(c), b(c), other(c);
  a.init_random(7);
  b.init_random(7);
  other.init_random(8);
  const NamedTensors pa = a.named_parameters(), pb = b.named_parameters(), po = other.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) CHECK(pa[i].second.equal(pb[i].second));
  CHECK_FALSE(a.layers[0].mlp.up_proj.weight.equal(other.layers[0].mlp.up_proj.weight));
  CHECK(a.norm.weight.eq(1).all().item<bool>());
  CHECK(a.layers[0].input_layernorm.weight.eq(1).all().item<bool>());
  CHECK(a.layers[0].self_attn.q_proj.bias.eq(0).all().item<bool>());
  CHECK(a.layers[0].mlp.gate_proj.weight.std().item<double>() == Approx(0.02).epsilon(0.1));
  CHECK(a.embed_tokens[0].eq(0).all().item<bool>());  // padding row
  CHECK_FALSE(a.embed_tokens[1].eq(0).all().item<bool>());
  // Values do not depend on the dtype: bf16 init = fp32 init rounded.
  Transformer half(c, ModelHead::kCausalLm, at::TensorOptions().dtype(at::kBFloat16));
  half.init_random(7);
  CHECK(half.layers[0].mlp.gate_proj.weight.equal(a.layers[0].mlp.gate_proj.weight.to(at::kBFloat16)));
}

TEST_CASE("load rejects missing, unexpected and misshaped tensors", "[model]") {
  const ModelConfig c = tiny("llama");
  Transformer model = make_model(c, 1);
  const at::Tensor before = model.layers[0].self_attn.q_proj.weight.clone();
  NamedTensors weights = random_weights(model, 2);

  NamedTensors missing = weights;
  missing.erase(missing.begin() + 5);
  CHECK_THAT(load_error(model, missing), Catch::Contains("missing") && Catch::Contains(weights[5].first));

  NamedTensors unexpected = weights;
  unexpected.emplace_back("model.layers.9.mlp.up_proj.weight", at::zeros({96, 64}));
  CHECK_THAT(load_error(model, unexpected),
             Catch::Contains("unexpected") && Catch::Contains("model.layers.9.mlp.up_proj.weight"));

  NamedTensors misshaped = weights;
  for (auto& [name, tensor] : misshaped) {
    if (name == "model.layers.0.self_attn.q_proj.weight") tensor = at::zeros({63, 64});
  }
  CHECK_THAT(load_error(model, misshaped), Catch::Contains("model.layers.0.self_attn.q_proj.weight") &&
                                               Catch::Contains("[63, 64]") && Catch::Contains("[64, 64]"));
  // A rejected load changes nothing.
  CHECK(model.layers[0].self_attn.q_proj.weight.equal(before));

  // A partial load (one bucket of a weight update) replaces only what it names.
  const at::Tensor new_norm = at::full({64}, 3.0);
  CHECK(load_error(model, {{"model.norm.weight", new_norm}}, LoadMode::kPartial).empty());
  CHECK(model.norm.weight.equal(new_norm));
  CHECK(model.layers[0].self_attn.q_proj.weight.equal(before));
  CHECK_THAT(load_error(model, {{"model.norm.weight", new_norm}}), Catch::Contains("missing"));

  // As in HF: lm_head of a tied model and rotary inv_freq buffers are ignored.
  Transformer tied(tiny("qwen2"));
  NamedTensors extra = random_weights(tied, 3);
  extra.emplace_back("lm_head.weight", at::zeros({kVocab, 64}));
  extra.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", at::zeros({8}));
  CHECK(load_error(tied, extra).empty());
  CHECK_FALSE(tied.embed_tokens.eq(0).all().item<bool>());
}

TEST_CASE("deepseek_v3 loading skips the multi-token-prediction layers after the last, as HF", "[model]") {
  const ModelConfig c = tiny_deepseek_v3();  // layers 0 and 1
  Transformer model(c);
  NamedTensors tensors = random_weights(model, 4);
  tensors.emplace_back("model.layers.2.eh_proj.weight", at::zeros({4, 4}));  // DeepSeek's MTP module
  tensors.emplace_back("model.layers.2.self_attn.kv_b_proj.weight", at::zeros({4, 4}));
  CHECK(load_error(model, tensors).empty());
  tensors.emplace_back("model.layers.1.eh_proj.weight", at::zeros({4, 4}));  // inside the model: unknown
  CHECK_THAT(load_error(model, tensors), Catch::Contains("model.layers.1.eh_proj.weight"));
  Transformer llama(tiny("llama"));  // only DeepSeek-V3 has them
  NamedTensors llama_tensors = random_weights(llama, 4);
  llama_tensors.emplace_back("model.layers.2.eh_proj.weight", at::zeros({4, 4}));
  CHECK_THAT(load_error(llama, llama_tensors), Catch::Contains("model.layers.2.eh_proj.weight"));
}

TEST_CASE("exported parameters load into a new model with identical outputs", "[model]") {
  for (const ModelConfig& c : all_variants()) {
    const Transformer a = make_model(c, 11);
    Transformer b(c);
    b.load(a.named_parameters());
    const at::Tensor ids = random_ids(2, 6, 1);
    CHECK(a.forward(ids).equal(b.forward(ids)));
  }
}

TEST_CASE("incremental KV-cache forward equals the full-sequence forward", "[model]") {
  for (const ModelConfig& c : all_variants()) {
    INFO(c.model_type << (c.mlp_bias ? " with biases and llama3 rope" : ""));
    const Transformer model = make_model(c, 3);
    const int64_t len = 10;
    const at::Tensor ids = random_ids(2, len, 4);
    const at::Tensor full = model.forward(ids);
    REQUIRE(full.sizes() == at::IntArrayRef{2, len, kVocab});

    KvCache cache = model.make_cache(2, 16);
    for (int64_t t = 0; t < len; ++t) {
      const at::Tensor step = model.forward(ids.slice(1, t, t + 1), cache);
      CHECK(max_diff(step, full.slice(1, t, t + 1)) < 1e-5);
    }
    CHECK(cache.used == len);
    CHECK(cache.lengths.equal(at::full({2}, len, at::kLong)));

    // Chunked prefill + decode, keeping only the last position's logits.
    KvCache chunked = model.make_cache(2, 16);
    const at::Tensor last = model.forward(ids.slice(1, 0, 6), chunked, {}, {}, /*keep_last=*/1);
    CHECK(last.size(1) == 1);
    CHECK(max_diff(last, full.slice(1, 5, 6)) < 1e-5);
    CHECK(max_diff(model.forward(ids.slice(1, 6, len), chunked), full.slice(1, 6, len)) < 1e-5);
  }
}

TEST_CASE("a left-padded batch equals each sequence run alone", "[model]") {
  const int64_t lengths[] = {3, 7, 5};
  const int64_t width = 7;
  for (const ModelConfig& c : all_variants()) {
    INFO(c.model_type);
    const Transformer model = make_model(c, 5);
    const at::Tensor rows = random_ids(3, width + 3, 6);  // prompt + 3 generated tokens per row
    at::Tensor ids = at::zeros({3, width}, at::kLong);
    at::Tensor mask = at::zeros({3, width}, at::kLong);
    for (int64_t r = 0; r < 3; ++r) {
      ids[r].slice(0, width - lengths[r]).copy_(rows[r].slice(0, 0, lengths[r]));
      mask[r].slice(0, width - lengths[r]).fill_(1);
    }
    const at::Tensor batched = model.forward(ids, mask);
    for (int64_t r = 0; r < 3; ++r) {
      const at::Tensor alone = model.forward(rows[r].slice(0, 0, lengths[r]).unsqueeze(0));
      CHECK(max_diff(batched[r].slice(0, width - lengths[r]), alone[0]) < 1e-5);
    }

    // Batched generation: left-padded prefill, then one token per row per step.
    KvCache cache = model.make_cache(3, 16);
    at::Tensor last = model.forward(ids, cache, mask, {}, /*keep_last=*/1);
    for (int64_t step = 0; step <= 3; ++step) {
      for (int64_t r = 0; r < 3; ++r) {
        const at::Tensor alone = model.forward(rows[r].slice(0, 0, lengths[r] + step).unsqueeze(0));
        CHECK(max_diff(last[r][0], alone[0][lengths[r] + step - 1]) < 1e-5);
      }
      if (step == 3) break;
      at::Tensor next = at::empty({3, 1}, at::kLong);
      for (int64_t r = 0; r < 3; ++r) next[r][0] = rows[r][lengths[r] + step];
      last = model.forward(next, cache);
    }
    CHECK(cache.lengths.equal(at::tensor({6, 10, 8}, at::kLong)));
  }
}

TEST_CASE("a packed forward equals the left-padded batch", "[model]") {
  // Rows back to back in one row, positions restarting at each: what a train
  // engine's use_remove_padding runs. A one-token row and a sliding window
  // shorter than the rows are in. Rows of similar length attend as one padded
  // batch, rows of very different length one at a time: both are checked.
  const std::vector<int64_t> lengths = GENERATE(std::vector<int64_t>{3, 7, 1, 5}, std::vector<int64_t>{90, 2, 3});
  const int64_t width = *std::max_element(lengths.begin(), lengths.end());
  std::vector<ModelConfig> variants = all_variants();
  ModelConfig mistral = tiny("llama");
  mistral.model_type = "mistral";
  mistral.sliding_window = 4;
  variants.push_back(mistral);
  for (const ModelConfig& c : variants) {
    INFO(c.model_type << ", longest row " << width);
    const Transformer model = make_model(c, 8);
    const auto rows = static_cast<int64_t>(lengths.size());
    const at::Tensor tokens = random_ids(rows, width, 9);
    at::Tensor ids = at::zeros({rows, width}, at::kLong);
    at::Tensor mask = at::zeros({rows, width}, at::kLong);
    std::vector<at::Tensor> packed_ids, positions;
    for (int64_t r = 0; r < rows; ++r) {
      const at::Tensor row = tokens[r].slice(0, 0, lengths[r]);
      ids[r].slice(0, width - lengths[r]).copy_(row);
      mask[r].slice(0, width - lengths[r]).fill_(1);
      packed_ids.push_back(row);
      positions.push_back(at::arange(lengths[r], at::kLong));
    }
    const at::Tensor padded = model.forward(ids, mask);
    const ForwardContext ctx = model.prepare_packed(at::cat(positions).unsqueeze(0), lengths);
    CHECK(ctx.packed());
    const at::Tensor packed = model.apply_head(model.hidden_states(at::cat(packed_ids).unsqueeze(0), ctx));
    REQUIRE(packed.size(1) == std::accumulate(lengths.begin(), lengths.end(), int64_t{0}));
    int64_t offset = 0;
    for (int64_t r = 0; r < rows; ++r) {
      CHECK(max_diff(packed[0].slice(0, offset, offset + lengths[r]), padded[r].slice(0, width - lengths[r])) < 1e-5);
      offset += lengths[r];
    }
  }
  const Transformer model = make_model(tiny("llama"), 8);
  CHECK_THROWS_WITH(model.prepare_packed(at::zeros({1, 3}, at::kLong), {3, 0}), Catch::Contains("at least one token"));
  CHECK_THROWS_WITH(model.prepare_packed(at::zeros({2, 3}, at::kLong), {3}),
                    Catch::Contains("position_ids [1, tokens]"));
}

TEST_CASE("right-padded prompts also decode correctly", "[model]") {
  // Padding slots are masked and positions count real tokens, so padding in
  // the middle of a row's slots is harmless; only the prefill's last logits
  // must be read at each row's own last token.
  const int64_t lengths[] = {2, 5, 4};
  const Transformer model = make_model(tiny("qwen2"), 27);
  const at::Tensor rows = random_ids(3, 8, 28);
  at::Tensor ids = at::zeros({3, 5}, at::kLong);
  at::Tensor mask = at::zeros({3, 5}, at::kLong);
  for (int64_t r = 0; r < 3; ++r) {
    ids[r].slice(0, 0, lengths[r]).copy_(rows[r].slice(0, 0, lengths[r]));
    mask[r].slice(0, 0, lengths[r]).fill_(1);
  }
  KvCache cache = model.make_cache(3, 8);
  at::Tensor prefill = model.forward(ids, cache, mask);
  for (int64_t step = 0; step < 3; ++step) {
    at::Tensor next = at::empty({3, 1}, at::kLong);
    for (int64_t r = 0; r < 3; ++r) {
      const int64_t len = lengths[r] + step;
      const at::Tensor got = step == 0 ? prefill[r][lengths[r] - 1] : prefill[r][0];
      const at::Tensor alone = model.forward(rows[r].slice(0, 0, len).unsqueeze(0));
      CHECK(max_diff(got, alone[0][len - 1]) < 1e-5);
      next[r][0] = rows[r][len];
    }
    prefill = model.forward(next, cache);
  }
}

TEST_CASE("removing finished rows keeps the remaining rows' outputs", "[model]") {
  const Transformer model = make_model(tiny("qwen3"), 9);
  const at::Tensor ids = random_ids(3, 6, 10);
  at::Tensor mask = at::ones({3, 6}, at::kLong);
  mask[1].slice(0, 0, 4).fill_(0);  // row 1: 2 tokens
  mask[2].slice(0, 0, 2).fill_(0);  // row 2: 4 tokens
  const at::Tensor steps = random_ids(3, 5, 11);

  KvCache all = model.make_cache(3, 16);
  KvCache shrunk = model.make_cache(3, 16);
  model.forward(ids, all, mask);
  model.forward(ids, shrunk, mask);
  for (int64_t t = 0; t < 2; ++t) {
    model.forward(steps.slice(1, t, t + 1), all);
    model.forward(steps.slice(1, t, t + 1), shrunk);
  }
  // Row 0 (the longest) finishes: the slots only it used are dropped too.
  shrunk.keep_rows(at::tensor({1, 2}, at::kLong));
  CHECK(shrunk.batch_size() == 2);
  CHECK(shrunk.used == all.used - 2);
  CHECK(shrunk.lengths.equal(at::tensor({4, 6}, at::kLong)));
  for (int64_t t = 2; t < 5; ++t) {
    const at::Tensor expected = model.forward(steps.slice(1, t, t + 1), all).slice(0, 1, 3);
    const at::Tensor got = model.forward(steps.slice(1, t, t + 1).slice(0, 1, 3), shrunk);
    CHECK(max_diff(got, expected) < 1e-5);
  }
  // Down to one row, then none.
  shrunk.keep_rows(at::tensor({0}, at::kLong));
  CHECK(shrunk.used == all.used - 4);
  shrunk.keep_rows(at::empty({0}, at::kLong));
  CHECK(shrunk.batch_size() == 0);
  CHECK(shrunk.used == 0);
}

TEST_CASE("GQA equals MHA with explicitly repeated kv weights", "[model]") {
  for (const char* arch : {"qwen2", "qwen3"}) {  // with kv biases, with k_norm
    INFO(arch);
    const ModelConfig gqa_config = tiny(arch);
    ModelConfig mha_config = gqa_config;
    mha_config.num_key_value_heads = mha_config.num_attention_heads;
    const Transformer gqa = make_model(gqa_config, 13);
    const int64_t groups = gqa_config.num_kv_groups();
    const int64_t head_dim = gqa_config.head_dim;
    // kv head g serves query heads g*groups .. g*groups + groups - 1.
    std::vector<int64_t> order;
    for (int64_t h = 0; h < mha_config.num_attention_heads; ++h) order.push_back(h / groups);
    const at::Tensor index = at::tensor(order, at::kLong);
    NamedTensors weights;
    for (const auto& [name, tensor] : gqa.named_parameters()) {
      const bool kv = name.find("k_proj") != std::string::npos || name.find("v_proj") != std::string::npos;
      if (!kv) {
        weights.emplace_back(name, tensor);
        continue;
      }
      std::vector<int64_t> shape = tensor.sizes().vec();
      std::vector<int64_t> heads_shape = {gqa_config.num_key_value_heads, head_dim};
      heads_shape.insert(heads_shape.end(), shape.begin() + 1, shape.end());
      at::Tensor repeated = tensor.reshape(heads_shape).index_select(0, index);
      shape[0] = mha_config.num_attention_heads * head_dim;
      weights.emplace_back(name, repeated.reshape(shape));
    }
    Transformer mha(mha_config);
    mha.load(weights);
    const at::Tensor ids = random_ids(2, 8, 14);
    CHECK(max_diff(gqa.forward(ids), mha.forward(ids)) < 1e-5);
  }
}

TEST_CASE("outputs are causal: later tokens do not change earlier logits", "[model]") {
  const Transformer model = make_model(tiny("llama"), 15);
  const at::Tensor ids = random_ids(2, 8, 16);
  at::Tensor changed = ids.clone();
  changed.slice(1, 5).fill_(1);
  const at::Tensor a = model.forward(ids), b = model.forward(changed);
  CHECK(max_diff(a.slice(1, 0, 5), b.slice(1, 0, 5)) < 1e-6);
  CHECK(max_diff(a.slice(1, 5), b.slice(1, 5)) > 1e-3);
}

TEST_CASE("bf16 forward is close to fp32", "[model]") {
  for (const ModelConfig& c : all_variants()) {
    INFO(c.model_type);
    const Transformer fp32 = make_model(c, 17);
    Transformer bf16(c, ModelHead::kCausalLm, at::TensorOptions().dtype(at::kBFloat16));
    bf16.load(fp32.named_parameters());
    const at::Tensor ids = random_ids(2, 8, 18);
    const at::Tensor expected = fp32.forward(ids);
    const at::Tensor got = bf16.forward(ids);
    CHECK(got.scalar_type() == at::kBFloat16);
    const double relative = got.to(at::kFloat).sub(expected).norm().item<double>() / expected.norm().item<double>();
    CHECK(relative < 0.03);
    KvCache cache = bf16.make_cache(2, 8);
    CHECK(cache.keys[0].scalar_type() == at::kBFloat16);
    const at::Tensor cached = bf16.forward(ids, cache);
    CHECK(max_diff(cached, got) < 0.05 * expected.abs().max().item<double>());
  }
}

TEST_CASE("critic head returns one value per token from the shared trunk", "[model]") {
  const ModelConfig c = tiny("llama");
  const Transformer lm = make_model(c, 19);
  Transformer critic(c, ModelHead::kValue);
  NamedTensors weights;
  for (const auto& entry : lm.named_parameters()) {
    if (entry.first != "lm_head.weight") weights.push_back(entry);
  }
  // score = lm_head row 5 with bias 0.25: values must equal logit 5 + 0.25.
  weights.emplace_back("score.weight", lm.head.weight.slice(0, 5, 6));
  weights.emplace_back("score.bias", at::full({1}, 0.25));
  critic.load(weights);
  const at::Tensor ids = random_ids(2, 6, 20);
  at::Tensor mask = at::ones({2, 6}, at::kLong);
  mask[0].slice(0, 0, 2).fill_(0);
  const at::Tensor values = critic.forward(ids, mask);
  REQUIRE(values.sizes() == at::IntArrayRef{2, 6});
  const at::Tensor logits = lm.forward(ids, mask);
  CHECK(max_diff(values, logits.select(2, 5).add(0.25)) < 1e-5);
}

TEST_CASE("gradients reach every parameter", "[model]") {
  for (const char* arch : kArchs) {
    Transformer model = make_model(tiny(arch), 21);
    model.set_requires_grad(true);
    model.forward(random_ids(2, 5, 22)).pow(2).mean().backward();
    for (const auto& [name, param] : model.named_parameters()) {
      INFO(name);
      REQUIRE(param.grad().defined());
      CHECK(param.grad().abs().sum().item<double>() > 0);
    }
  }
}

TEST_CASE("deepseek_v3: gradients reach every parameter but the choice-only router bias", "[model]") {
  Transformer model = make_model(tiny_deepseek_v3(), 21);
  model.set_requires_grad(true);
  model.forward(random_ids(4, 8, 22)).pow(2).mean().backward();
  int64_t experts_unchosen = 0;
  for (const auto& [name, param] : model.named_parameters()) {
    INFO(name);
    if (name.find("e_score_correction_bias") != std::string::npos) {
      CHECK_FALSE(param.grad().defined());  // it steers which experts, never how much
      continue;
    }
    if (name.find(".mlp.experts.") != std::string::npos && !param.grad().defined()) {
      ++experts_unchosen;  // an expert no token chose is not read
      continue;
    }
    REQUIRE(param.grad().defined());
    CHECK(param.grad().abs().sum().item<double>() > 0);
  }
  CHECK(experts_unchosen < 8 * 3);  // most experts of the sparse layer are chosen by some token
}

TEST_CASE("forward validates its inputs", "[model]") {
  const Transformer model = make_model(tiny("llama"), 23);
  const at::Tensor ids = random_ids(2, 4, 24);
  CHECK_THROWS_WITH(model.forward(ids, at::ones({2, 5}, at::kLong)),
                    Catch::Contains("attention_mask") && Catch::Contains("[2, 5]") && Catch::Contains("[2, 4]"));
  CHECK_THROWS_AS(model.forward(ids.to(at::kFloat)), ValueError);
  KvCache cache = model.make_cache(2, 6);
  model.forward(ids, cache);
  CHECK_THROWS_WITH(model.forward(ids, cache), Catch::Contains("KV cache full"));
  KvCache wrong_batch = model.make_cache(3, 6);
  CHECK_THROWS_WITH(model.forward(ids, wrong_batch), Catch::Contains("3 rows"));
}

TEST_CASE("a shape-static decode step equals the incremental forward", "[model]") {
  ModelConfig mistral = tiny("llama");
  mistral.model_type = "mistral";
  mistral.sliding_window = 4;  // shorter than the decode, so the window blocks keys
  std::vector<ModelConfig> variants = all_variants();
  variants.push_back(mistral);
  const int64_t lengths[] = {3, 7, 5};
  for (const ModelConfig& c : variants) {
    INFO(c.model_type << (c.sliding_window ? " with a sliding window" : ""));
    const Transformer model = make_model(c, 31);
    at::Tensor ids = random_ids(3, 7, 32);
    at::Tensor mask = at::ones({3, 7}, at::kLong);
    for (int64_t r = 0; r < 3; ++r) mask[r].slice(0, 0, 7 - lengths[r]).fill_(0);
    const at::Tensor steps = random_ids(3, 6, 33);
    KvCache incremental = model.make_cache(3, 16);
    KvCache shape_static = model.make_cache(3, 16);
    model.forward(ids, incremental, mask);
    model.forward(ids, shape_static, mask);
    at::Tensor slot = at::empty({1}, at::kLong);
    at::Tensor rows = at::arange(3, at::kLong);
    for (int64_t t = 0; t < 6; ++t) {
      if (t == 3) {  // row 1 (the longest prompt) leaves, and with it the slots only it used
        rows = at::tensor({0, 2}, at::kLong);
        incremental.keep_rows(at::tensor({0, 2}, at::kLong));
        shape_static.keep_rows(at::tensor({0, 2}, at::kLong));
      }
      const at::Tensor next = steps.slice(1, t, t + 1).index_select(0, rows);
      const at::Tensor expected = model.forward(next, incremental);
      slot.fill_(shape_static.used);
      const at::Tensor got = model.forward_decode(next, shape_static, slot);
      ++shape_static.used;
      CHECK(max_diff(got, expected) < 1e-5);
    }
    CHECK(shape_static.lengths.equal(incremental.lengths));
    CHECK(shape_static.valid.equal(incremental.valid));
  }
}

TEST_CASE("forward_decode validates its inputs", "[model]") {
  const Transformer model = make_model(tiny("llama"), 23);
  KvCache cache = model.make_cache(2, 3);
  model.forward(random_ids(2, 2, 24), cache);
  const at::Tensor slot = at::full({1}, 2, at::kLong);
  CHECK_THROWS_WITH(model.forward_decode(random_ids(2, 2, 25), cache, slot),
                    Catch::Contains("[2, 1]") && Catch::Contains("[2, 2]"));
  CHECK_THROWS_WITH(model.forward_decode(random_ids(3, 1, 25), cache, slot), Catch::Contains("[3, 1]"));
  CHECK_THROWS_WITH(model.forward_decode(random_ids(2, 1, 25), cache, slot.to(at::kInt)),
                    Catch::Contains("one-element int64"));
  model.forward_decode(random_ids(2, 1, 25), cache, slot);
  ++cache.used;
  CHECK_THROWS_WITH(model.forward_decode(random_ids(2, 1, 26), cache, slot), Catch::Contains("KV cache full"));
}
