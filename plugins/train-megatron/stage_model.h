// The computation of one pipeline stage on one tensor-parallel rank, in
// Megatron-core's layout: fused linear_qkv split per query group (or
// DeepSeek-V3's latent attention, split by heads), fused linear_fc1 = [gate; up],
// row-parallel outputs reduced over tp, a vocabulary-parallel embedding and head. Weights (this rank's shards, in the
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
  // Latent attention (instead of qkv): the replicated down projections and their
  // norms, the column-parallel up projections (q_proj without a q_lora_rank).
  at::Tensor q_proj, q_down, q_down_bias, q_latent_norm, q_up, kv_down, kv_down_bias, kv_latent_norm, kv_up;
  at::Tensor pre_mlp_norm, fc1_weight, fc1_bias, fc2_weight, fc2_bias;
  at::Tensor router;
  at::Tensor router_bias, shared_fc1, shared_fc2;  // DeepSeek-V3: whole on every tp rank
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
  // mid + the layer's MLP (dense: tp-split; sparse: replicated) of pre_mlp_norm(mid).
  at::Tensor mlp_block(const at::Tensor& mid, const LayerWeights& w, model::Routed* routed,
                       const at::Tensor& replay) const;
  // This rank's heads of DeepSeek-V3's attention over h (already copied to tp), before the tp reduction.
  at::Tensor latent_attention(const at::Tensor& h, const LayerWeights& w, const model::ForwardContext& ctx) const;

  const CommGroup& tp_;
  const CommGroup& ep_;
  int64_t local_groups_;     // query groups (= kv heads) on this rank
  int64_t heads_per_group_;  // query heads per group
  int64_t local_heads_;      // query heads on this rank
  double scaling_;
};

}  // namespace rlcore::train_megatron
