// Helpers for the infer-native tests: tiny random checkpoints written with the
// real writer into temp dirs, engines over them, and no-cache reference decoding.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <catch2/catch.hpp>
#include "../../common/scratch_dir.h"
#include "../../common/error_of.h"

#include "native_engine.h"
#include "rlcore/core/checkpoint_init.h"
#include "rlcore/error.h"
#include "rlcore/model/config.h"
#include "rlcore/model/transformer.h"

namespace infer_native_test {

using rlcore_test::error_of;

namespace fs = std::filesystem;
using rlcore::model::ModelConfig;
using rlcore::model::Transformer;

// A fresh directory under the system temp dir, removed with the object.
class TempDir : public rlcore_test::ScratchDir {
 public:
  TempDir() : ScratchDir("infer_native") {}
};

// A tiny config: fast on CPU, with logits spread enough (initializer_range)
// that greedy choices are far from ties.
inline ModelConfig tiny_config(const std::string& arch = "llama") {
  ModelConfig c = rlcore::model::preset(arch, "tiny", 320);
  c.hidden_size = 64;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 128;
  c.num_hidden_layers = 2;
  c.max_position_embeddings = 128;
  c.initializer_range = 0.1;
  c.eos_token_ids = {319};
  if (c.latent_attention()) {  // one kv head per query head; key heads 16 + 8 wide, value heads 16
    c.num_key_value_heads = c.num_attention_heads;
    c.head_dim = 8;
    c.qk_nope_head_dim = 16;
    c.v_head_dim = 16;
    c.kv_lora_rank = 32;
    c.q_lora_rank = 48;
    c.moe_intermediate_size = 32;
  }
  c.validate("tiny test config");
  return c;
}

inline Transformer random_model(const ModelConfig& config, uint64_t seed) {
  Transformer model(config, rlcore::model::ModelHead::kCausalLm, at::TensorOptions().dtype(at::kFloat));
  model.init_random(seed);
  return model;
}

// Writes `model` as an HF checkpoint directory with the built-in tokenizer.
inline void write_checkpoint(const fs::path& dir, const Transformer& model,
                             uint64_t max_shard_bytes = rlcore::kCheckpointMaxShardBytes) {
  rlcore::write_hf_checkpoint(dir, model.config(), model.named_parameters(), rlcore::builtin_tokenizer_files(),
                              max_shard_bytes);
}

inline rlcore::infer_native::NativeEngine make_engine(const fs::path& dir,
                                                      rlcore::infer_native::NativeEngineOptions options = {}) {
  rlcore::ComponentContext context;
  context.model_path = dir.string();
  return rlcore::infer_native::NativeEngine(options, context);
}

// A checkpoint of a random tiny model in a temp dir, with the model kept for reference.
struct Fixture {
  explicit Fixture(const std::string& arch = "llama", uint64_t seed = 1)
      : model(random_model(tiny_config(arch), seed)) {
    write_checkpoint(dir.path(), model);
  }
  TempDir dir;
  Transformer model;
};

inline at::Tensor row_tensor(const std::vector<int32_t>& ids) {
  std::vector<int64_t> wide(ids.begin(), ids.end());
  return at::tensor(wide, at::kLong).unsqueeze(0);
}

// Greedy decoding without a cache: the full sequence is re-run every step.
inline std::vector<int32_t> reference_greedy(const Transformer& model, std::vector<int32_t> ids, int64_t steps) {
  at::NoGradGuard no_grad;
  std::vector<int32_t> out;
  for (int64_t s = 0; s < steps; ++s) {
    const at::Tensor logits = model.forward(row_tensor(ids)).select(0, 0).select(0, -1);
    const auto token = static_cast<int32_t>(logits.argmax().item<int64_t>());
    out.push_back(token);
    ids.push_back(token);
  }
  return out;
}

// Teacher-forced log_softmax(logits / temperature) at each response token.
inline std::vector<float> reference_logprobs(const Transformer& model, const std::vector<int32_t>& prompt,
                                             const std::vector<int32_t>& response, double temperature) {
  at::NoGradGuard no_grad;
  std::vector<int32_t> ids = prompt;
  ids.insert(ids.end(), response.begin(), response.end());
  const at::Tensor logits = model.forward(row_tensor(ids)).select(0, 0).to(at::kFloat);
  const at::Tensor logp = at::log_softmax(logits / temperature, -1);
  std::vector<float> out;
  for (size_t t = 0; t < response.size(); ++t) {
    out.push_back(logp[static_cast<int64_t>(prompt.size() + t) - 1][response[t]].item<float>());
  }
  return out;
}

// Greedy decoding of up to `max_tokens` tokens.
inline rlcore::SamplingParams greedy(int64_t max_tokens) {
  rlcore::SamplingParams params;
  params.temperature = 0.0;
  params.max_tokens = max_tokens;
  return params;
}

// Seeded sampling of up to `max_tokens` tokens.
inline rlcore::SamplingParams sampled(int64_t max_tokens, int64_t seed, double temperature = 1.0) {
  rlcore::SamplingParams params;
  params.temperature = temperature;
  params.max_tokens = max_tokens;
  params.seed = seed;
  return params;
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

inline const std::vector<std::vector<int32_t>>& test_prompts() {
  static const std::vector<std::vector<int32_t>> prompts = {
      {5, 17, 42}, {100, 7, 250, 33, 9, 61, 2}, {12, 220, 13, 14, 300, 15, 81, 16, 17, 18, 203, 19}};
  return prompts;
}

}  // namespace infer_native_test
