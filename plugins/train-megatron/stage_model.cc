// One pipeline stage's forward on one tensor-parallel rank.
#include "stage_model.h"

#include <cmath>

#include <ATen/ATen.h>

#include "expert_dispatch.h"

namespace rlcore::train_megatron {

StageModel::StageModel(const model::ModelConfig& config, const CommGroup& tp, const CommGroup& ep)
    : config_(config),
      tp_(tp),
      ep_(ep),
      local_groups_(config.num_key_value_heads / tp.size()),
      heads_per_group_(config.num_attention_heads / config.num_key_value_heads),
      local_heads_(config.num_attention_heads / tp.size()),
      scaling_(config.latent_attention() ? config.attention_scaling()
                                         : std::pow(static_cast<double>(config.head_dim), -0.5)) {}

at::Tensor StageModel::embed(const at::Tensor& input_ids, const at::Tensor& embedding_shard) const {
  return vocab_parallel_embedding(input_ids, embedding_shard, vocab_start(), tp_);
}

model::SparseMoe StageModel::sparse_block(const LayerWeights& w) const {
  model::SparseMoe moe;
  moe.gate.weight = w.router;
  moe.top_k = config_.num_experts_per_tok;
  moe.norm_topk_prob = config_.norm_topk_prob;
  moe.style = config_.architecture().layers.moe_style;
  // [gate; up] and down as a gated MLP (views, so gradients reach the fused weights).
  const auto gated_mlp = [](const at::Tensor& fc1, const at::Tensor& fc2) {
    const int64_t rows = fc1.size(0) / 2;
    model::Mlp mlp;
    mlp.gate_proj.weight = fc1.narrow(0, 0, rows);
    mlp.up_proj.weight = fc1.narrow(0, rows, rows);
    mlp.down_proj.weight = fc2;
    return mlp;
  };
  for (size_t e = 0; e < w.expert_fc1.size(); ++e) moe.experts.push_back(gated_mlp(w.expert_fc1[e], w.expert_fc2[e]));
  if (moe.style == model::MoeStyle::kDeepseekV3) {
    moe.e_score_correction_bias = w.router_bias;
    moe.n_group = config_.n_group;
    moe.topk_group = config_.topk_group;
    moe.routed_scaling_factor = config_.routed_scaling_factor;
    if (w.shared_fc1.defined()) moe.shared_experts = gated_mlp(w.shared_fc1, w.shared_fc2);
  }
  if (ep_.size() > 1) {
    const CommGroup* ep = &ep_;
    moe.experts_override = [ep](const model::SparseMoe& block, const at::Tensor& tokens, const model::Routed& routed) {
      return dispatch_to_experts(block, tokens, routed, *ep);
    };
  }
  return moe;
}

at::Tensor StageModel::latent_attention(const at::Tensor& h, const LayerWeights& w,
                                        const model::ForwardContext& ctx) const {
  // libs/model's LatentAttention over this rank's heads. Each rank computes the
  // replicated down projections and norms for its heads only, so their
  // gradients are summed over tp (copy_to_tp on the weights).
  const auto replicated = [&](const at::Tensor& weight) {
    return weight.defined() ? copy_to_tp(weight, tp_) : at::Tensor();
  };
  model::LatentAttention attn;
  attn.q_proj.weight = w.q_proj;
  attn.q_a_proj = model::Linear{replicated(w.q_down), replicated(w.q_down_bias)};
  attn.q_a_layernorm = model::RmsNorm{replicated(w.q_latent_norm), 1e-6};  // HF's eps for the latent norms
  attn.q_b_proj.weight = w.q_up;
  attn.kv_a_proj_with_mqa = model::Linear{replicated(w.kv_down), replicated(w.kv_down_bias)};
  attn.kv_a_layernorm = model::RmsNorm{replicated(w.kv_latent_norm), 1e-6};
  attn.kv_b_proj.weight = w.kv_up;
  attn.o_proj.weight = w.proj_weight;
  attn.num_heads = local_heads_;
  attn.qk_nope_head_dim = config_.qk_nope_head_dim;
  attn.rope_head_dim = config_.head_dim;
  attn.v_head_dim = config_.v_head_dim;
  attn.kv_lora_rank = config_.kv_lora_rank;
  attn.rope_interleave = config_.rope_interleave;
  attn.scaling = scaling_;
  model::ForwardContext uncached = ctx;
  uncached.cache = nullptr;
  return attn(h, uncached, /*layer=*/0);
}

at::Tensor StageModel::layer(const at::Tensor& x, const LayerWeights& w, const model::ForwardContext& ctx,
                             model::Routed* routed, const at::Tensor& replay) const {
  if (config_.latent_attention()) {
    const double eps = config_.rms_norm_eps;
    const at::Tensor h = copy_to_tp(model::RmsNorm{w.input_norm, eps}(x), tp_);
    at::Tensor attention = reduce_from_tp(latent_attention(h, w, ctx), tp_);
    if (w.proj_bias.defined()) attention = attention + w.proj_bias;
    return mlp_block(x + attention, w, routed, replay);
  }
  const int64_t batch = x.size(0);
  const int64_t len = x.size(1);
  const int64_t dim = config_.head_dim;
  const double eps = config_.rms_norm_eps;
  const at::Tensor h = copy_to_tp(model::RmsNorm{w.input_norm, eps}(x), tp_);
  // [B, T, groups, q heads of the group + k + v, D]: Megatron's per-group fusion.
  const at::Tensor qkv =
      at::linear(h, w.qkv_weight, w.qkv_bias).view({batch, len, local_groups_, heads_per_group_ + 2, dim});
  at::Tensor q = qkv.narrow(3, 0, heads_per_group_).reshape({batch, len, local_groups_ * heads_per_group_, dim});
  at::Tensor k = qkv.select(3, heads_per_group_);
  at::Tensor v = qkv.select(3, heads_per_group_ + 1).transpose(1, 2);
  if (w.q_norm.defined()) {
    // Each tp rank normalises only its heads: the replicated norm weights' gradients are summed over tp.
    q = model::RmsNorm{copy_to_tp(w.q_norm, tp_), eps}(q);
    k = model::RmsNorm{copy_to_tp(w.k_norm, tp_), eps}(k);
  }
  q = model::apply_rotary(q.transpose(1, 2), ctx.cos, ctx.sin);
  k = model::apply_rotary(k.transpose(1, 2), ctx.cos, ctx.sin);
  // Every layer slides or none does (the engine refuses per-layer patterns).
  const bool sliding = config_.sliding_window.has_value();
  at::Tensor attention = reduce_from_tp(at::linear(model::attend(ctx, q, k, v, sliding, scaling_), w.proj_weight), tp_);
  if (w.proj_bias.defined()) attention = attention + w.proj_bias;
  return mlp_block(x + attention, w, routed, replay);
}

at::Tensor StageModel::mlp_block(const at::Tensor& mid, const LayerWeights& w, model::Routed* routed,
                                 const at::Tensor& replay) const {
  const double eps = config_.rms_norm_eps;
  if (w.router.defined()) {
    // Router and experts are whole on every tp rank: the block runs replicated
    // on the full input, so neither its input nor its output crosses tp.
    return mid + sparse_block(w)(model::RmsNorm{w.pre_mlp_norm, eps}(mid), routed, replay);
  }

  const at::Tensor m = copy_to_tp(model::RmsNorm{w.pre_mlp_norm, eps}(mid), tp_);
  const at::Tensor gate_up = at::linear(m, w.fc1_weight, w.fc1_bias);
  const int64_t channels = gate_up.size(-1) / 2;
  at::Tensor mlp = reduce_from_tp(
      at::linear(at::silu(gate_up.narrow(-1, 0, channels)) * gate_up.narrow(-1, channels, channels), w.fc2_weight),
      tp_);
  if (w.fc2_bias.defined()) mlp = mlp + w.fc2_bias;
  return mid + mlp;
}

TokenLogProbs StageModel::head(const at::Tensor& hidden, const at::Tensor& final_norm, const at::Tensor& output_shard,
                               const at::Tensor& targets, double temperature, bool entropy, bool sum_pi_squared) const {
  const at::Tensor h = copy_to_tp(model::RmsNorm{final_norm, config_.rms_norm_eps}(hidden), tp_);
  at::Tensor logits = at::linear(h, output_shard).to(at::kFloat);
  if (temperature != 1.0) logits = logits / temperature;
  return vocab_parallel_log_probs(logits, targets, vocab_start(), tp_, entropy, sum_pi_squared);
}

}  // namespace rlcore::train_megatron
