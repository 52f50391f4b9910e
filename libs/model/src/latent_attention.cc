// DeepSeek-V3's multi-head latent attention in transformers' op order, so
// logits match DeepseekV3Attention's eager implementation.
#include <tuple>
#include <vector>

#include <ATen/ATen.h>

#include "rlcore/model/layers.h"

namespace rlcore::model {

at::Tensor LatentAttention::operator()(const at::Tensor& x, const ForwardContext& ctx, int64_t layer) const {
  const int64_t batch = x.size(0);
  const int64_t len = x.size(1);
  const at::Tensor queries = q_a_proj.weight.defined() ? q_b_proj(q_a_layernorm(q_a_proj(x))) : q_proj(x);
  const at::Tensor q = queries.view({batch, len, num_heads, qk_nope_head_dim + rope_head_dim}).transpose(1, 2);
  const std::vector<at::Tensor> q_parts = q.split_with_sizes({qk_nope_head_dim, rope_head_dim}, -1);

  const std::vector<at::Tensor> latent_parts =
      kv_a_proj_with_mqa(x).split_with_sizes({kv_lora_rank, rope_head_dim}, -1);
  const at::Tensor latent = kv_a_layernorm(latent_parts[0]);
  const at::Tensor k_rope_unrotated = latent_parts[1].view({batch, 1, len, rope_head_dim});

  const auto rotate = rope_interleave ? apply_rotary_interleaved : apply_rotary;
  const at::Tensor q_rope = rotate(q_parts[1], ctx.cos, ctx.sin);
  const at::Tensor k_rope = rotate(k_rope_unrotated, ctx.cos, ctx.sin);

  // Every head's key: its own decompressed part, then the one shared rotary part.
  const at::Tensor kv = kv_b_proj(latent).view({batch, len, num_heads, qk_nope_head_dim + v_head_dim}).transpose(1, 2);
  const std::vector<at::Tensor> kv_parts = kv.split_with_sizes({qk_nope_head_dim, v_head_dim}, -1);
  at::Tensor k = at::cat({kv_parts[0], k_rope.expand({batch, num_heads, len, rope_head_dim})}, -1);
  at::Tensor v = kv_parts[1];
  std::tie(k, v) = append_to_cache(ctx, layer, k, v);

  const at::Tensor query = at::cat({q_parts[0], q_rope}, -1);
  return o_proj(attend(ctx, query, k, v, /*sliding=*/false, scaling));
}

void LatentAttention::collect(const std::string& prefix, ParameterSlots& out) {
  q_proj.collect(prefix + ".q_proj", out);
  q_a_proj.collect(prefix + ".q_a_proj", out);
  q_a_layernorm.collect(prefix + ".q_a_layernorm", out);
  q_b_proj.collect(prefix + ".q_b_proj", out);
  kv_a_proj_with_mqa.collect(prefix + ".kv_a_proj_with_mqa", out);
  kv_a_layernorm.collect(prefix + ".kv_a_layernorm", out);
  kv_b_proj.collect(prefix + ".kv_b_proj", out);
  o_proj.collect(prefix + ".o_proj", out);
}

}  // namespace rlcore::model
