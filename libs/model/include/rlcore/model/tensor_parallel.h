// The tensor-parallel layout of the Llama / Qwen decoder over HF parameter
// names (Megatron convention), in one place for every engine and adaptor:
// column-parallel projections are split along dim 0 (output features: whole
// heads / MLP channels), row-parallel ones along dim 1 (input features), and
// everything else is replicated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/model/config.h"

namespace rlcore::model {

enum class TpSplit {
  kReplicated,  // embeddings, norms (incl. qwen3 q_norm / k_norm), lm_head, row-parallel biases
  kColumn,      // q/k/v_proj, gate/up_proj: weight and bias split along dim 0
  kRow,         // o_proj, down_proj weights: split along dim 1 (the bias is added after the all-reduce)
};

TpSplit tp_split(const std::string& name);

// ValueError naming the config key unless tp_size >= 1 divides
// num_attention_heads, num_key_value_heads and intermediate_size.
void validate_tp(const ModelConfig& config, int64_t tp_size);

// The shape one of tp_size ranks holds of `name`. ValueError naming the
// tensor when the split dimension does not divide by tp_size.
std::vector<int64_t> tp_shard_shape(const std::string& name, at::IntArrayRef full_shape, int64_t tp_size);

// Rank tp_rank's piece of the full tensor `name`: a view (no copy; not
// contiguous for row-parallel weights), the full tensor when replicated.
at::Tensor tp_slice(const std::string& name, const at::Tensor& full, int64_t tp_rank, int64_t tp_size);

}  // namespace rlcore::model
