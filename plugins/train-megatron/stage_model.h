// The computation of one pipeline stage on one tensor-parallel rank, in
// Megatron-core's layout: fused linear_qkv split per query group, fused
// linear_fc1 = [gate; up], row-parallel outputs reduced over tp, a
// vocabulary-parallel embedding and head. Weights (this rank's shards, in the
// compute dtype) are passed per call, so the engine owns all parameter state.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/comm_context.h"
#include "rlcore/model/config.h"
#include "rlcore/model/layers.h"
#include "tensor_parallel_ops.h"

namespace rlcore::train_megatron {

// One decoder layer's shards; optional tensors are undefined when the model has none.
// A sparse layer has a router and its rank's experts (whole, [gate; up] and down)
// instead of fc1 / fc2.
struct LayerWeights {
  at::Tensor input_norm, qkv_weight, qkv_bias, q_norm, k_norm, proj_weight, proj_bias;
  at::Tensor pre_mlp_norm, fc1_weight, fc1_bias, fc2_weight, fc2_bias;
  at::Tensor router;
  std::vector<at::Tensor> expert_fc1, expert_fc2;  // this rank's experts, in global order
};

class StageModel {
 public:
  // `tp` and `ep` must outlive the model (backward passes refer to them).
  StageModel(const model::ModelConfig& config, const CommGroup& tp, const CommGroup& ep);

  at::Tensor embed(const at::Tensor& input_ids, const at::Tensor& embedding_shard) const;
  // x [B, T, hidden] -> [B, T, hidden]. A sparse layer's routing goes to `routed` when given.
  // A sparse layer records its routing into `routed` when given, and sends the
  // tokens to the experts `replay` names when defined (SparseMoe::route).
  at::Tensor layer(const at::Tensor& x, const LayerWeights& w, const model::ForwardContext& ctx,
                   model::Routed* routed = nullptr, const at::Tensor& replay = {}) const;
  // hidden [B, R, hidden] at the positions that predict `targets` [B, R]; logits are divided by `temperature`.
  TokenLogProbs head(const at::Tensor& hidden, const at::Tensor& final_norm, const at::Tensor& output_shard,
                     const at::Tensor& targets, double temperature, bool entropy, bool sum_pi_squared = false) const;

  // The first vocabulary id of this rank's embedding / output shard.
  int64_t vocab_start() const { return tp_.rank() * (config_.vocab_size / tp_.size()); }

 private:
  model::ModelConfig config_;
  model::SparseMoe sparse_block(const LayerWeights& w) const;

  const CommGroup& tp_;
  const CommGroup& ep_;
  int64_t local_groups_;     // query groups (= kv heads) on this rank
  int64_t heads_per_group_;  // query heads per group
  double scaling_;
};

}  // namespace rlcore::train_megatron
