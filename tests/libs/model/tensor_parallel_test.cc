// The tensor-parallel layout: every parameter of each architecture is
// classified, shards tile the full tensor, slices are views, and bad sizes
// are errors that name the key or tensor.
#include <ATen/ATen.h>

#include "rlcore/error.h"
#include "rlcore/model/tensor_parallel.h"
#include "rlcore/model/transformer.h"

#include <catch2/catch.hpp>
#include "../../common/error_of.h"
#include "full_featured_config.h"

using namespace rlcore::model;
using rlcore_test::error_of;

namespace {

using rlcore_test::full_featured;

TpSplit expected_split(const std::string& name) {
  for (const char* column : {".q_proj.", ".k_proj.", ".v_proj.", ".gate_proj.", ".up_proj."}) {
    if (name.find(column) != std::string::npos) return TpSplit::kColumn;
  }
  for (const char* row : {".o_proj.weight", ".down_proj.weight"}) {
    if (name.find(row) != std::string::npos) return TpSplit::kRow;
  }
  return TpSplit::kReplicated;
}

}  // namespace

TEST_CASE("tp_split: column q/k/v/gate/up (weight and bias), row o/down weights, the rest replicated", "[model][tp]") {
  for (const std::string arch : {"llama", "qwen2", "qwen3"}) {
    INFO(arch);
    const ModelConfig config = full_featured(arch);
    int64_t column = 0, row = 0;
    for (const ParameterSpec& spec : parameter_specs(config)) {
      INFO(spec.name);
      const TpSplit split = tp_split(spec.name);
      CHECK(split == expected_split(spec.name));
      column += split == TpSplit::kColumn;
      row += split == TpSplit::kRow;
    }
    CHECK(column == (config.mlp_bias ? 10 : 8));  // 5 weights, q/k/v biases, gate/up biases with mlp_bias
    CHECK(row == 2);
  }
  CHECK(tp_split("model.layers.0.self_attn.q_norm.weight") == TpSplit::kReplicated);
  CHECK(tp_split("model.layers.0.self_attn.o_proj.bias") == TpSplit::kReplicated);
  CHECK(tp_split("model.layers.0.mlp.down_proj.bias") == TpSplit::kReplicated);
  CHECK(tp_split("model.embed_tokens.weight") == TpSplit::kReplicated);
  CHECK(tp_split("lm_head.weight") == TpSplit::kReplicated);
}

TEST_CASE("tp shards tile the full tensor along the split dim and are views of it", "[model][tp]") {
  const ModelConfig config = full_featured("llama");
  Transformer model(config, ModelHead::kCausalLm, at::TensorOptions().dtype(at::kFloat));
  model.init_random(3);
  for (const int64_t tp : {1, 2}) {
    for (const auto& [name, full] : model.named_parameters()) {
      INFO(name << " tp " << tp);
      const std::vector<int64_t> shape = tp_shard_shape(name, full.sizes(), tp);
      std::vector<at::Tensor> pieces;
      for (int64_t rank = 0; rank < tp; ++rank) {
        const at::Tensor piece = tp_slice(name, full, rank, tp);
        CHECK(piece.sizes() == at::IntArrayRef(shape));
        CHECK(piece.storage().unsafeGetStorageImpl() == full.storage().unsafeGetStorageImpl());
        pieces.push_back(piece);
      }
      const TpSplit split = tp_split(name);
      if (split == TpSplit::kReplicated || tp == 1) {
        CHECK(shape == full.sizes().vec());
        for (const at::Tensor& piece : pieces) CHECK(at::equal(piece, full));
      } else {
        const int64_t dim = split == TpSplit::kRow ? 1 : 0;
        CHECK(shape[dim] * tp == full.size(dim));
        CHECK(at::equal(at::cat(pieces, dim), full));
      }
    }
  }
  // Rank 1 of q_proj holds the second half of the heads: rows [16, 32).
  const at::Tensor q = model.layers[0].self_attn.q_proj.weight;
  CHECK(at::equal(tp_slice("model.layers.0.self_attn.q_proj.weight", q, 1, 2), q.slice(0, 16, 32)));
  const at::Tensor o = model.layers[0].self_attn.o_proj.weight;
  CHECK(at::equal(tp_slice("model.layers.0.self_attn.o_proj.weight", o, 1, 2), o.slice(1, 16, 32)));
}

TEST_CASE("validate_tp and the shard functions reject sizes that do not divide, naming the key or tensor",
          "[model][tp]") {
  ModelConfig config = full_featured("llama");
  CHECK_NOTHROW(validate_tp(config, 2));
  CHECK(error_of<rlcore::ValueError>([&] { validate_tp(config, 4); }).find("num_key_value_heads (2)") !=
        std::string::npos);
  CHECK(error_of<rlcore::ValueError>([&] { validate_tp(config, 3); }).find("num_attention_heads (4)") !=
        std::string::npos);
  config.intermediate_size = 51;
  CHECK(error_of<rlcore::ValueError>([&] { validate_tp(config, 2); }).find("intermediate_size (51)") !=
        std::string::npos);
  CHECK(error_of<rlcore::ValueError>([&] { validate_tp(config, 0); }).find(">= 1") != std::string::npos);
  CHECK(error_of<rlcore::ValueError>([&] {
          validate_tp(preset("deepseek_v3", "tiny", 64), 2);
        }).find("multi-head latent attention (deepseek_v3)") != std::string::npos);

  const at::Tensor weight = at::zeros({6, 4});
  const std::string name = "model.layers.0.mlp.gate_proj.weight";
  CHECK(error_of<rlcore::ValueError>([&] { tp_shard_shape(name, weight.sizes(), 4); }).find(name) != std::string::npos);
  CHECK(error_of<rlcore::ValueError>([&] { tp_slice(name, weight, 2, 2); }).find("rank 2") != std::string::npos);
}
