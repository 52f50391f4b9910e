// Building blocks of the Llama / Mistral / Qwen2 / Qwen3 / Gemma 2 / DeepSeek-V3 decoders as plain structs of
// at::Tensor, so training engines can wrap or swap them (FSDP per layer, TP linears).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/model/architecture.h"
#include "rlcore/model/config.h"

namespace rlcore::model {

class KvCache;

// (HF name, parameter slot): the slot lets engines replace a parameter (a
// gathered FSDP shard, a TP slice) as well as read it.
using ParameterSlots = std::vector<std::pair<std::string, at::Tensor*>>;

// y = x W^T + b. Every projection goes through this, so a tensor-parallel
// engine can install a column/row-parallel forward without touching the model.
struct Linear {
  at::Tensor weight;  // [out_features, in_features]
  at::Tensor bias;    // [out_features]; undefined when the layer has none
  // Used instead of at::linear when set (e.g. matmul on a shard + all-reduce).
  std::function<at::Tensor(const Linear&, const at::Tensor&)> forward_override;

  at::Tensor operator()(const at::Tensor& x) const;
  void collect(const std::string& prefix, ParameterSlots& out);
};

// HF LlamaRMSNorm: normalises in fp32 and casts back before the weight
// multiply. With weight_offset, Gemma2RMSNorm: scales by (1 + weight) in fp32, then casts.
struct RmsNorm {
  at::Tensor weight;  // [dim]
  double eps = 1e-6;
  bool weight_offset = false;

  at::Tensor operator()(const at::Tensor& x) const;
  void collect(const std::string& prefix, ParameterSlots& out);
};

// HF inv_freq: 1 / theta^(2i/d) for i < d/2, in fp32, with linear / llama3 /
// yarn rope_scaling applied.
at::Tensor rope_inv_freq(const ModelConfig& config);

// Rotary position embedding. cos/sin are computed per forward from the
// position ids (as HF does since 4.38), once for all layers: no sync, no
// max_position-sized buffer, bitwise the same values a precomputed table gives.
class RotaryEmbedding {
 public:
  RotaryEmbedding() = default;
  RotaryEmbedding(const ModelConfig& config, const at::Device& device);

  // position_ids [B, T] (integer) -> cos, sin [B, T, head_dim] in `dtype`;
  // the angle is computed in fp32 like HF, then cast.
  std::pair<at::Tensor, at::Tensor> cos_sin(const at::Tensor& position_ids, c10::ScalarType dtype) const;
  const at::Tensor& inv_freq() const { return inv_freq_; }

 private:
  at::Tensor inv_freq_;             // [head_dim / 2], fp32
  double attention_scaling_ = 1.0;  // yarn's attention_factor: cos and sin are scaled by it
};

// HF rotate_half: [x1, x2] -> [-x2, x1] over the last dim split in halves.
at::Tensor rotate_half(const at::Tensor& x);
// x [B, heads, T, D] with cos/sin [B, T, D]: x*cos + rotate_half(x)*sin.
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);
// DeepSeek's interleaved layout (HF apply_rotary_pos_emb_interleave): the pairs
// (x0, x1), (x2, x3), ... each rotated by one frequency, the result laid out
// as [rotated evens, rotated odds]. Shapes as apply_rotary.
at::Tensor apply_rotary_interleaved(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// What a forward's sparse layers routed, per layer (undefined for a dense
// layer): each token's chosen experts [tokens, top_k] (int64, in the router's
// order) and the router's logits [tokens, num_experts]; tokens are the batch's
// positions flattened, padding included. Routing replay and the router's
// auxiliary losses read it.
struct MoeRouting {
  std::vector<at::Tensor> chosen;
  std::vector<at::Tensor> router_logits;

  explicit MoeRouting(size_t layers = 0) : chosen(layers), router_logits(layers) {}
};

// One sparse block's routing of its tokens.
struct Routed {
  at::Tensor chosen;         // [N, top_k] int64
  at::Tensor weights;        // [N, top_k]: how each chosen expert's output is weighted
  at::Tensor router_logits;  // [N, num_experts]
};

// Switch Transformer's load-balancing loss over the sparse layers of one
// recorded forward, as transformers' load_balancing_loss_func computes it:
// num_experts * sum_e f_e * P_e, where f_e counts the top-k choices of expert
// e per token and P_e is e's mean router probability, over the real tokens
// (attention_mask [B, T] 1; all when undefined) of every sparse layer together.
// Differentiable through P_e; 0 when the forward had no sparse layer.
at::Tensor load_balancing_loss(const MoeRouting& routing, int64_t num_experts, const at::Tensor& attention_mask = {});

// What every layer of one forward shares; built once by Transformer::prepare.
struct ForwardContext {
  at::Tensor cos, sin;  // [B, T, head_dim], compute dtype
  // [B or 1, 1, T, S] bool, true where query t must NOT see key s (future, padding,
  // an empty cache slot); undefined when none is. S = T, or offset + T with a cache.
  at::Tensor blocked;
  // The same for layers with a sliding window, which also block keys `window`
  // or more slots before the query; undefined when the model has no window.
  at::Tensor blocked_sliding;
  KvCache* cache = nullptr;  // new k/v go to slots [cache_offset, cache_offset + T)
  int64_t cache_offset = 0;
  // Set by Transformer::forward_decode instead of cache_offset: a one-element
  // int64 tensor on the device, the slot the step's k/v go to. Attention then
  // spans every slot of the cache (blocked is [B, 1, 1, max_len]), so no shape
  // depends on how full the cache is.
  at::Tensor cache_slot;
  // Set by the caller: each sparse layer records its routing here.
  MoeRouting* routing = nullptr;
  // Set by the caller: each sparse layer with a defined replay.chosen[layer]
  // sends its tokens to those experts (routing replay; SparseMoe::route).
  const MoeRouting* replay = nullptr;
  // Set by Transformer::prepare_packed: the forward's one row holds several
  // sequences back to back (packing without padding), sequence i at slots
  // [segment_offsets[i], segment_offsets[i + 1]); attention stays within each,
  // and blocked / blocked_sliding are the causal masks of the longest.
  std::vector<int64_t> segment_offsets;
  // Set by a sequence-parallel engine: this rank's row is one slice of the
  // packed sequence. Attention exchanges q, k, v [B, heads, T / N, D] for
  // [B, heads / N, T, D] (heads_to_sequence) before attending and the output
  // back after (sequence_to_heads: [B, T, heads / N * Dv] -> [B, T / N, heads * Dv]).
  struct SequenceParallel {
    std::function<at::Tensor(const at::Tensor&)> heads_to_sequence;
    std::function<at::Tensor(const at::Tensor&)> sequence_to_heads;
  };
  const SequenceParallel* sequence_parallel = nullptr;

  bool packed() const { return !segment_offsets.empty(); }
};

// Attention of one layer over what the context allows: grouped_attention with
// the layer's mask, sequence by sequence for a packed forward, across the
// sequence-parallel group when there is one. q [B, H, T, D], k, v as
// grouped_attention's; returns [B, T, H * Dv].
at::Tensor attend(const ForwardContext& ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  bool sliding, double scaling, double softcap = 0.0);

// This forward's new keys and values k, v [B, KV, T, D] -> what its queries attend
// over: the layer's cache slots up to the new ones, with k and v written into
// them, or k and v themselves when the forward has no cache.
std::pair<at::Tensor, at::Tensor> append_to_cache(const ForwardContext& ctx, int64_t layer, const at::Tensor& k,
                                                  const at::Tensor& v);

// Softmax attention with grouped kv heads, HF's op order (fp32 softmax).
// q [B, H, T, D], k [B, KV, S, D] and v [B, KV, S, Dv]: query heads h of group g = h / (H / KV)
// share kv head g (HF repeat_kv order), without copying kv per query head.
// `blocked` as ForwardContext::blocked (undefined: nothing blocked).
// softcap > 0: scores -> tanh(scores / softcap) * softcap before masking (Gemma 2).
// Returns [B, T, H * Dv].
at::Tensor grouped_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& blocked,
                             double scaling, double softcap = 0.0);

// Causal self-attention with grouped kv heads. Each kv head serves
// num_heads / num_kv_heads consecutive query heads (HF repeat_kv order); the
// grouping is done by reshaping q, so kv is never copied per query head.
struct Attention {
  Linear q_proj, k_proj, v_proj, o_proj;
  RmsNorm q_norm, k_norm;  // qwen3 only (undefined weight otherwise), over head_dim
  // Heads held by this rank: a TP engine sets the local counts.
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  double scaling = 1.0;  // 1 / sqrt(head_dim), or Gemma 2's query_pre_attn_scalar
  double softcap = 0.0;  // Gemma 2's attn_logit_softcapping; 0 = none
  bool sliding = false;  // attends through ForwardContext::blocked_sliding

  // x [B, T, hidden] -> [B, T, hidden]; `layer` picks this layer's cache.
  at::Tensor operator()(const at::Tensor& x, const ForwardContext& ctx, int64_t layer) const;
  void collect(const std::string& prefix, ParameterSlots& out);
};

// DeepSeek-V3's multi-head latent attention (HF DeepseekV3Attention, its op
// order): queries through q_proj or the low-rank q_a_proj -> q_a_layernorm ->
// q_b_proj; keys and values decompressed by kv_b_proj from the normed latent
// of kv_a_proj_with_mqa, whose last head_dim features are one rotary key part
// shared by every head. The KV cache holds the decompressed keys
// [B, heads, S, qk_nope_head_dim + rope_head_dim] and values [B, heads, S, v_head_dim]
// (HF caches the latent instead: less memory, the same attention).
struct LatentAttention {
  Linear q_proj;                          // when the config has no q_lora_rank
  Linear q_a_proj, q_b_proj;              // when it has one
  RmsNorm q_a_layernorm, kv_a_layernorm;  // eps 1e-6, as HF builds them
  Linear kv_a_proj_with_mqa, kv_b_proj, o_proj;
  int64_t num_heads = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t rope_head_dim = 0;
  int64_t v_head_dim = 0;
  int64_t kv_lora_rank = 0;
  bool rope_interleave = false;
  double scaling = 1.0;

  bool defined() const { return kv_a_proj_with_mqa.weight.defined(); }
  // x [B, T, hidden] -> [B, T, hidden]; `layer` picks this layer's cache.
  at::Tensor operator()(const at::Tensor& x, const ForwardContext& ctx, int64_t layer) const;
  void collect(const std::string& prefix, ParameterSlots& out);
};

// Gated MLP: down(act(gate(x)) * up(x)), act SiLU (SwiGLU) or GELU-tanh (Gemma 2).
struct Mlp {
  Linear gate_proj, up_proj, down_proj;
  bool gelu_tanh = false;

  at::Tensor operator()(const at::Tensor& x) const;
  void collect(const std::string& prefix, ParameterSlots& out);
};

// A mixture of experts (HF's sparse MoE blocks, their op order): the router's
// softmax (fp32) over the experts, each token's top_k, their weights
// renormalised when norm_topk_prob, then per expert with tokens one gated MLP
// over its tokens only (tokens sorted by expert), weighted and summed back.
// DeepSeek-V3 routes otherwise (sigmoid scores within the best groups, see
// route()) and adds shared experts.
struct SparseMoe {
  // Where the families differ (MoeStyle): Qwen3-MoE casts the weights to the
  // hidden dtype before weighting; Mixtral weights in fp32. DeepSeek-V3 routes by
  // sigmoid scores within its best groups (route()) and adds shared experts.
  using Style = MoeStyle;

  Linear gate;  // the router: [num_experts, hidden], no bias
  std::vector<Mlp> experts;
  int64_t top_k = 0;
  bool norm_topk_prob = false;
  Style style = Style::kQwen3Moe;
  HfMoeNames names;  // the block's and its experts' HF names (Mixtral: "block_sparse_moe", w1, w3, w2)
  // DeepSeek-V3 only. Its router, in fp32: scores = sigmoid(logits); each
  // token's choice among the experts of its topk_group best groups (a group
  // scores the sum of its best two scores + e_score_correction_bias) by
  // scores + e_score_correction_bias; the chosen experts weighted by their
  // scores (renormalised when norm_topk_prob) times routed_scaling_factor.
  at::Tensor e_score_correction_bias;  // [num_experts]; a parameter here, HF's buffer
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  Mlp shared_experts;  // added to every token's routed output (undefined weights: none)
  // Used instead of apply_experts when set (expert parallelism: the tokens
  // dispatched to the ranks holding their experts and back).
  std::function<at::Tensor(const SparseMoe&, const at::Tensor&, const Routed&)> experts_override;

  // tokens [N, hidden] -> each token's experts and weights. With `replay`
  // ([N, top_k] int64) the tokens go to those experts instead of the router's
  // top-k (routing replay), weighted by the router's probabilities (DeepSeek-V3:
  // unbiased scores) of them; a token whose replay row is -1 keeps the router's choice.
  Routed route(const at::Tensor& tokens, const at::Tensor& replay = {}) const;
  // The experts' weighted sum over routed tokens [N, hidden], grouped per expert.
  at::Tensor apply_experts(const at::Tensor& tokens, const Routed& routed) const;
  // x [..., hidden] -> [..., hidden]; the routing goes to `record` when given.
  at::Tensor operator()(const at::Tensor& x, Routed* record = nullptr, const at::Tensor& replay = {}) const;
  // The block's name in a layer ("mlp", "block_sparse_moe").
  const char* name() const { return names.block; }
  // "gate.weight", "experts.<e>.gate_proj.weight" (Mixtral: "experts.<e>.w1.weight") ... after `prefix`;
  // DeepSeek-V3 also "gate.e_score_correction_bias" and "shared_experts.gate_proj.weight" ...
  void collect(const std::string& prefix, ParameterSlots& out);
};

// Pre-norm block: x + attn(norm(x)), then h + mlp(norm(h)). With sandwich
// norms (Gemma 2, pre/post_feedforward_layernorm defined): x + post_attention_layernorm(
// attn(input_layernorm(x))), then h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h))).
struct DecoderLayer {
  RmsNorm input_layernorm;
  Attention self_attn;
  LatentAttention latent_attn;  // DeepSeek-V3's, used instead of self_attn when defined (HF name "self_attn")
  RmsNorm post_attention_layernorm;
  RmsNorm pre_feedforward_layernorm, post_feedforward_layernorm;  // Gemma 2 only
  Mlp mlp;
  SparseMoe moe;  // a sparse layer's MLP (ModelConfig::layer_is_sparse): used instead of mlp

  at::Tensor operator()(const at::Tensor& x, const ForwardContext& ctx, int64_t layer) const;
  // Names relative to the layer ("self_attn.q_proj.weight", ...) after `prefix`.
  void collect(const std::string& prefix, ParameterSlots& out);
};

// Allocates (uninitialised, at::empty) layer `index`, shaped by `config`.
DecoderLayer make_decoder_layer(const ModelConfig& config, const at::TensorOptions& options, int64_t index);

}  // namespace rlcore::model
