#include "hf_testing.h"

#include <fstream>

#include <ATen/ATen.h>

#include "rlcore/safetensors/safetensors.h"

#include <catch2/catch.hpp>

#include "../common/reference_python.h"
#include "../common/test_paths.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace hf_testing {
namespace {

at::Tensor rows_tensor(const TokenRows& rows) {
  std::vector<int64_t> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  return at::tensor(flat, at::kLong).view({static_cast<int64_t>(rows.size()), -1});
}

at::Tensor read_floats(const fs::path& path, const std::vector<int64_t>& shape) {
  at::Tensor tensor = at::empty(shape, at::kFloat);
  std::ifstream in(path, std::ios::binary);
  in.read(static_cast<char*>(tensor.data_ptr()), static_cast<std::streamsize>(tensor.nbytes()));
  INFO(path.string());
  REQUIRE(in.gcount() == static_cast<std::streamsize>(tensor.nbytes()));
  return tensor;
}

const std::string& script() {
  static const std::string path = rlcore_test::reference_script("hf/reference/hf_models.py");
  return path;
}

}  // namespace

at::Tensor Inputs::ids_tensor() const { return rows_tensor(ids); }
at::Tensor Inputs::mask_tensor() const { return rows_tensor(mask); }
json Inputs::to_json() const { return {{"input_ids", ids}, {"attention_mask", mask}}; }

fs::path scratch_dir(const std::string& name) {
  const fs::path dir = fs::path(rlcore_test::binary_dir()) / "hf_tests" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

Reference make_reference_model(const std::string& family, const json& config, const Inputs& inputs, int64_t new_tokens,
                               const fs::path& dir, const std::string& max_shard_size) {
  json spec = inputs.to_json();
  spec["family"] = family;
  spec["config"] = config;
  spec["seed"] = 7;
  spec["new_tokens"] = new_tokens;
  if (!max_shard_size.empty()) spec["max_shard_size"] = max_shard_size;
  const fs::path spec_path = dir.parent_path() / (dir.filename().string() + ".case.json");
  std::ofstream(spec_path) << spec.dump();
  rlcore_test::run_reference(script(), {"make", spec_path.string(), dir.string()});
  std::ifstream outputs_file(dir / "reference" / "outputs.json");
  const json outputs = json::parse(outputs_file);
  Reference reference;
  reference.logits = read_floats(dir / "reference" / "logits.bin", outputs["logits"].get<std::vector<int64_t>>());
  reference.logprobs = read_floats(dir / "reference" / "logprobs.bin", outputs["logprobs"].get<std::vector<int64_t>>());
  reference.greedy = outputs["greedy"].get<TokenRows>();
  reference.max_abs_logit = outputs["max_abs_logit"].get<double>();
  if (outputs.contains("experts")) reference.experts = outputs["experts"].get<std::vector<TokenRows>>();
  if (outputs.contains("aux_loss")) reference.aux_loss = outputs["aux_loss"].get<double>();
  fs::remove_all(dir / "reference");  // the directory is a plain checkpoint again
  fs::remove(spec_path);
  return reference;
}

at::Tensor transformers_logits(const fs::path& dir, const Inputs& inputs) {
  const fs::path inputs_path = dir.parent_path() / (dir.filename().string() + ".inputs.json");
  const fs::path out_path = dir.parent_path() / (dir.filename().string() + ".logits.bin");
  std::ofstream(inputs_path) << inputs.to_json().dump();
  rlcore_test::run_reference(script(), {"logits", dir.string(), inputs_path.string(), out_path.string()});
  const int64_t batch = static_cast<int64_t>(inputs.ids.size());
  const int64_t len = static_cast<int64_t>(inputs.ids.front().size());
  const int64_t vocab = rlcore::model::ModelConfig::from_file((dir / "config.json").string()).vocab_size;
  at::Tensor logits = read_floats(out_path, {batch, len, vocab});
  fs::remove(inputs_path);
  fs::remove(out_path);
  return logits;
}

rlcore::model::Transformer load_checkpoint(const fs::path& dir) {
  const auto config = rlcore::model::ModelConfig::from_file((dir / "config.json").string());
  rlcore::model::Transformer model(config, rlcore::model::ModelHead::kCausalLm, at::TensorOptions().dtype(at::kFloat));
  model.load(rlcore::SafetensorsCheckpoint(dir).load_all());
  return model;
}

double relative_error(const at::Tensor& actual, const at::Tensor& expected) {
  REQUIRE(actual.sizes() == expected.sizes());
  const double scale = expected.abs().max().item<double>();
  REQUIRE(scale > 0);
  return (actual.to(at::kFloat) - expected).abs().max().item<double>() / scale;
}

TokenRows greedy(const rlcore::model::Transformer& model, const at::Tensor& ids, const at::Tensor& mask,
                 int64_t new_tokens) {
  rlcore::model::KvCache cache = model.make_cache(ids.size(0), ids.size(1) + new_tokens);
  at::Tensor next = model.forward(ids, cache, mask, {}, 1).argmax(-1);  // [B, 1]
  std::vector<at::Tensor> steps = {next};
  for (int64_t step = 1; step < new_tokens; ++step) {
    next = model.forward(next, cache, {}, {}, 1).argmax(-1);
    steps.push_back(next);
  }
  const at::Tensor tokens = at::cat(steps, 1).contiguous();
  TokenRows rows(tokens.size(0));
  for (int64_t r = 0; r < tokens.size(0); ++r) {
    const int64_t* row = tokens[r].data_ptr<int64_t>();
    rows[r].assign(row, row + tokens.size(1));
  }
  return rows;
}

nlohmann::json deepseek_v3_config(const nlohmann::json& overrides) {
  nlohmann::json config = {{"num_key_value_heads", 4},  // latent attention: one kv head per query head
                           {"n_routed_experts", 8},
                           {"n_group", 4},
                           {"topk_group", 2},
                           {"num_experts_per_tok", 3},
                           {"moe_intermediate_size", 32},
                           {"n_shared_experts", 1},
                           {"first_k_dense_replace", 1},
                           {"kv_lora_rank", 24},
                           {"q_lora_rank", 32},
                           {"qk_rope_head_dim", 8},
                           {"head_dim", 8},  // transformers lets a given head_dim override qk_rope_head_dim
                           {"qk_nope_head_dim", 16},
                           {"v_head_dim", 12},
                           {"routed_scaling_factor", 2.5}};
  config.update(overrides);
  return config;
}

}  // namespace hf_testing
