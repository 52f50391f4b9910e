// Decoder building blocks with HF's exact op order (fp32 RMSNorm, fp32 rotary
// angles, fp32 softmax) so logits match transformers' eager implementation.
#include "rlcore/model/layers.h"

#include <cmath>
#include <limits>

#include <ATen/ATen.h>

#include "rlcore/model/kv_cache.h"

namespace rlcore::model {

at::Tensor Linear::operator()(const at::Tensor& x) const {
  if (forward_override) return forward_override(*this, x);
  return at::linear(x, weight, bias);
}

void Linear::collect(const std::string& prefix, ParameterSlots& out) {
  if (weight.defined()) out.emplace_back(prefix + ".weight", &weight);
  if (bias.defined()) out.emplace_back(prefix + ".bias", &bias);
}

at::Tensor RmsNorm::operator()(const at::Tensor& x) const {
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor variance = xf.pow(2).mean(-1, /*keepdim=*/true);
  return weight * (xf * at::rsqrt(variance + eps)).to(x.scalar_type());
}

void RmsNorm::collect(const std::string& prefix, ParameterSlots& out) {
  if (weight.defined()) out.emplace_back(prefix + ".weight", &weight);
}

at::Tensor rope_inv_freq(const ModelConfig& config) {
  const int64_t dim = config.head_dim;
  // Written as HF writes it (1 / theta ** (arange(0, d, 2) / d)) for bitwise-equal values.
  const at::Tensor exponent = at::arange(0, dim, 2, at::kLong).to(at::kFloat) / static_cast<double>(dim);
  at::Tensor inv_freq = at::reciprocal(at::pow(config.rope_theta, exponent));
  const RopeScaling& scaling = config.rope_scaling;
  if (scaling.rope_type == "linear") return inv_freq / scaling.factor;
  if (scaling.rope_type != "llama3") return inv_freq;
  // Llama 3.1: keep high frequencies, divide low ones by factor, interpolate between.
  const double old_len = static_cast<double>(scaling.original_max_position_embeddings);
  const double low_freq_wavelen = old_len / scaling.low_freq_factor;
  const double high_freq_wavelen = old_len / scaling.high_freq_factor;
  const at::Tensor wavelen = at::reciprocal(inv_freq) * (2 * M_PI);
  at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / scaling.factor, inv_freq);
  const at::Tensor smooth = (at::reciprocal(wavelen) * old_len - scaling.low_freq_factor) /
                            (scaling.high_freq_factor - scaling.low_freq_factor);
  const at::Tensor smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled;
  const at::Tensor medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return at::where(medium, smoothed, scaled);
}

RotaryEmbedding::RotaryEmbedding(const ModelConfig& config, const at::Device& device)
    : inv_freq_(rope_inv_freq(config).to(device)) {}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::cos_sin(const at::Tensor& position_ids,
                                                           c10::ScalarType dtype) const {
  const at::Tensor freqs = position_ids.to(at::kFloat).unsqueeze(-1) * inv_freq_;
  const at::Tensor angles = at::cat({freqs, freqs}, -1);
  return {angles.cos().to(dtype), angles.sin().to(dtype)};
}

at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const at::Tensor c = cos.unsqueeze(1);
  const at::Tensor s = sin.unsqueeze(1);
  return x * c + rotate_half(x) * s;
}

at::Tensor Attention::operator()(const at::Tensor& x, const ForwardContext& ctx, int64_t layer) const {
  const int64_t batch = x.size(0);
  const int64_t len = x.size(1);
  at::Tensor q = q_proj(x).view({batch, len, num_heads, head_dim});
  at::Tensor k = k_proj(x).view({batch, len, num_kv_heads, head_dim});
  at::Tensor v = v_proj(x).view({batch, len, num_kv_heads, head_dim}).transpose(1, 2);
  if (q_norm.weight.defined()) {
    q = q_norm(q);
    k = k_norm(k);
  }
  q = apply_rotary(q.transpose(1, 2), ctx.cos, ctx.sin);
  k = apply_rotary(k.transpose(1, 2), ctx.cos, ctx.sin);
  if (ctx.cache != nullptr) {
    const int64_t end = ctx.cache_offset + len;
    ctx.cache->keys[layer].slice(2, ctx.cache_offset, end).copy_(k);
    ctx.cache->values[layer].slice(2, ctx.cache_offset, end).copy_(v);
    k = ctx.cache->keys[layer].slice(2, 0, end);
    v = ctx.cache->values[layer].slice(2, 0, end);
  }
  const int64_t keys_len = k.size(2);
  // [B, H, T, D] -> [B, KV, G*T, D]: query heads h of group g = h / G share kv head g.
  const int64_t groups = num_heads / num_kv_heads;
  const at::Tensor q_grouped = q.reshape({batch, num_kv_heads, groups * len, head_dim});
  at::Tensor scores = at::matmul(q_grouped, k.transpose(-1, -2)) * scaling;
  scores = scores.view({batch, num_heads, len, keys_len}).to(at::kFloat);
  // A finite fill (HF uses finfo.min) keeps fully masked rows (padding
  // queries) uniform instead of NaN, so a masked loss never sees NaN.
  scores = scores.masked_fill(ctx.blocked, std::numeric_limits<float>::lowest());
  const at::Tensor probs = at::softmax(scores, -1).to(q.scalar_type());
  const at::Tensor out = at::matmul(probs.view({batch, num_kv_heads, groups * len, keys_len}), v);
  return o_proj(out.view({batch, num_heads, len, head_dim}).transpose(1, 2).reshape({batch, len, -1}));
}

void Attention::collect(const std::string& prefix, ParameterSlots& out) {
  q_proj.collect(prefix + ".q_proj", out);
  k_proj.collect(prefix + ".k_proj", out);
  v_proj.collect(prefix + ".v_proj", out);
  o_proj.collect(prefix + ".o_proj", out);
  q_norm.collect(prefix + ".q_norm", out);
  k_norm.collect(prefix + ".k_norm", out);
}

at::Tensor Mlp::operator()(const at::Tensor& x) const {
  return down_proj(at::silu(gate_proj(x)) * up_proj(x));
}

void Mlp::collect(const std::string& prefix, ParameterSlots& out) {
  gate_proj.collect(prefix + ".gate_proj", out);
  up_proj.collect(prefix + ".up_proj", out);
  down_proj.collect(prefix + ".down_proj", out);
}

at::Tensor DecoderLayer::operator()(const at::Tensor& x, const ForwardContext& ctx, int64_t layer) const {
  const at::Tensor h = x + self_attn(input_layernorm(x), ctx, layer);
  return h + mlp(post_attention_layernorm(h));
}

void DecoderLayer::collect(const std::string& prefix, ParameterSlots& out) {
  input_layernorm.collect(prefix + "input_layernorm", out);
  self_attn.collect(prefix + "self_attn", out);
  post_attention_layernorm.collect(prefix + "post_attention_layernorm", out);
  mlp.collect(prefix + "mlp", out);
}

namespace {

Linear make_linear(int64_t in, int64_t out, bool bias, const at::TensorOptions& options) {
  Linear linear;
  linear.weight = at::empty({out, in}, options);
  if (bias) linear.bias = at::empty({out}, options);
  return linear;
}

RmsNorm make_norm(int64_t dim, double eps, const at::TensorOptions& options) {
  return RmsNorm{at::empty({dim}, options), eps};
}

}  // namespace

DecoderLayer make_decoder_layer(const ModelConfig& c, const at::TensorOptions& options) {
  DecoderLayer layer;
  layer.input_layernorm = make_norm(c.hidden_size, c.rms_norm_eps, options);
  layer.post_attention_layernorm = make_norm(c.hidden_size, c.rms_norm_eps, options);
  Attention& attn = layer.self_attn;
  const int64_t q_dim = c.num_attention_heads * c.head_dim;
  const int64_t kv_dim = c.num_key_value_heads * c.head_dim;
  attn.q_proj = make_linear(c.hidden_size, q_dim, c.qkv_bias, options);
  attn.k_proj = make_linear(c.hidden_size, kv_dim, c.qkv_bias, options);
  attn.v_proj = make_linear(c.hidden_size, kv_dim, c.qkv_bias, options);
  attn.o_proj = make_linear(q_dim, c.hidden_size, c.o_proj_bias, options);
  if (c.qk_norm) {
    attn.q_norm = make_norm(c.head_dim, c.rms_norm_eps, options);
    attn.k_norm = make_norm(c.head_dim, c.rms_norm_eps, options);
  }
  attn.num_heads = c.num_attention_heads;
  attn.num_kv_heads = c.num_key_value_heads;
  attn.head_dim = c.head_dim;
  attn.scaling = std::pow(static_cast<double>(c.head_dim), -0.5);  // HF: head_dim**-0.5
  layer.mlp.gate_proj = make_linear(c.hidden_size, c.intermediate_size, c.mlp_bias, options);
  layer.mlp.up_proj = make_linear(c.hidden_size, c.intermediate_size, c.mlp_bias, options);
  layer.mlp.down_proj = make_linear(c.intermediate_size, c.hidden_size, c.mlp_bias, options);
  return layer;
}

}  // namespace rlcore::model
