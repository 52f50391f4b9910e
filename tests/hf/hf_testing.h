// Shared by the tests that hold rlcore to Hugging Face transformers: inputs,
// a reference model made by transformers (reference/hf_models.py), loading its
// checkpoint into rlcore, and the comparisons.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "rlcore/model/transformer.h"

namespace hf_testing {

using TokenRows = std::vector<std::vector<int64_t>>;

struct Inputs {
  TokenRows ids;
  TokenRows mask;  // 1 = token, 0 = padding

  at::Tensor ids_tensor() const;
  at::Tensor mask_tensor() const;
  nlohmann::json to_json() const;
};

// What transformers computed on the inputs: logits [B, T, vocab] and the
// log-probs of each next input token [B, T - 1] (fp32), greedy new tokens.
struct Reference {
  at::Tensor logits;
  at::Tensor logprobs;
  TokenRows greedy;
  double max_abs_logit = 0;
  // A mixture of experts: per sparse layer, per position (the batch's, flattened), the experts chosen, ascending.
  std::vector<TokenRows> experts;
  // transformers' load-balancing loss on the inputs (a mixture of experts that has one: not DeepSeek-V3's)
  std::optional<double> aux_loss;
};

// Overrides of the reference script's tiny config making a DeepSeek-V3 with every
// routing and attention part active (8 experts in 4 groups, 2 searched, 3 per
// token, a shared expert, layer 0 dense; a low-rank query; key heads 16 + 8
// wide, value heads 12), `overrides` on top.
nlohmann::json deepseek_v3_config(const nlohmann::json& overrides = nlohmann::json::object());

// <build>/hf_tests/<name>, emptied.
std::filesystem::path scratch_dir(const std::string& name);

// transformers builds a seeded tiny random `family` model with `config`
// overrides, save_pretrained's it to `dir` (sharded when `max_shard_size` is
// given, e.g. "60KB") and computes its outputs on `inputs`.
Reference make_reference_model(const std::string& family, const nlohmann::json& config, const Inputs& inputs,
                               int64_t new_tokens, const std::filesystem::path& dir,
                               const std::string& max_shard_size = "");

// transformers' logits [B, T, vocab] for the checkpoint in `dir`.
at::Tensor transformers_logits(const std::filesystem::path& dir, const Inputs& inputs);

// config.json + safetensors in `dir` -> an fp32 rlcore model.
rlcore::model::Transformer load_checkpoint(const std::filesystem::path& dir);

// max |actual - expected| / max |expected|.
double relative_error(const at::Tensor& actual, const at::Tensor& expected);

// `new_tokens` greedy tokens per row through the KV cache, prompts left-padded.
TokenRows greedy(const rlcore::model::Transformer& model, const at::Tensor& ids, const at::Tensor& mask,
                 int64_t new_tokens);

}  // namespace hf_testing
