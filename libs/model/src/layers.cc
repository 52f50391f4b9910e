// Decoder building blocks with HF's exact op order (fp32 RMSNorm, fp32 rotary
// angles, fp32 softmax) so logits match transformers' eager implementation.
#include "rlcore/model/layers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "cpu_kernels.h"
#include "fused_attention.h"
#include "gemv.h"
#include "rlcore/model/exact_forward.h"
#include "exact_autograd.h"
#include "rlcore/model/exact_linear.h"
#include "rlcore/model/kv_cache.h"

namespace rlcore::model {
namespace {

// In-place updates of intermediates are only safe when autograd does not record them.
bool without_autograd(const at::Tensor& a, const at::Tensor& b) {
  return !at::GradMode::is_enabled() || !((a.defined() && a.requires_grad()) || (b.defined() && b.requires_grad()));
}

// The weights of `linears` as one [sum of out_features, in_features] matrix
// when they lie back to back in one storage (make_decoder_layer allocates them
// so, and a swap bucket lays them out so): one GEMM instead of several, and no
// copy. Undefined when anything differs (a bias, an override, gradients, a gap).
at::Tensor adjacent_weights(std::initializer_list<const Linear*> linears) {
  const at::Tensor& first = (*linears.begin())->weight;
  if (!first.defined() || first.dim() != 2 || first.device().is_meta()) return {};
  const int64_t in = first.size(1);
  const char* next = static_cast<const char*>(first.data_ptr());
  int64_t rows = 0;
  for (const Linear* linear : linears) {
    const at::Tensor& w = linear->weight;
    if (linear->forward_override || linear->bias.defined() || !w.defined() || w.dim() != 2 || w.size(1) != in ||
        w.scalar_type() != first.scalar_type() || !w.is_contiguous() || w.requires_grad() ||
        !w.storage().is_alias_of(first.storage()) || static_cast<const char*>(w.data_ptr()) != next) {
      return {};
    }
    next += w.nbytes();
    rows += w.size(0);
  }
  return first.as_strided({rows, in}, {in, 1});
}

// Each of `linears` applied to x, through one GEMM when their weights are adjacent.
std::vector<at::Tensor> project(std::initializer_list<const Linear*> linears, const at::Tensor& x) {
  std::vector<at::Tensor> out;
  const at::Tensor fused = adjacent_weights(linears);
  if (!fused.defined()) {
    for (const Linear* linear : linears) out.push_back((*linear)(x));
    return out;
  }
  at::Tensor y = takes_exact_path(x, fused) ? exact_linear(x, fused) : cpu::gemv(x, fused, {});
  if (!y.defined()) y = at::linear(x, fused);
  int64_t start = 0;
  for (const Linear* linear : linears) {
    out.push_back(y.narrow(-1, start, linear->weight.size(0)));
    start += linear->weight.size(0);
  }
  return out;
}

}  // namespace

at::Tensor Linear::operator()(const at::Tensor& x) const {
  if (forward_override) return forward_override(*this, x);
  if (takes_exact_path(x, weight)) return exact_linear_trainable(x, weight, bias);
  if (at::Tensor y = cpu::gemv(x, weight, bias); y.defined()) return y;  // decode rows
  return at::linear(x, weight, bias);
}

void Linear::collect(const std::string& prefix, ParameterSlots& out) {
  if (weight.defined()) out.emplace_back(prefix + ".weight", &weight);
  if (bias.defined()) out.emplace_back(prefix + ".bias", &bias);
}

at::Tensor RmsNorm::operator()(const at::Tensor& x) const {
  if (weight_offset) {
    const at::Tensor xf = x.to(at::kFloat);
    return (xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps) * (1.0 + weight.to(at::kFloat)))
        .to(x.scalar_type());
  }
  // The exact forward takes the row-by-row loop in the trainer too, whose weight requires grad.
  if (takes_exact_path(x, weight) && x.numel() > 0) return exact_rms_norm_trainable(x, weight, eps);
  if (at::Tensor fused = cpu::rms_norm(x, weight, eps); fused.defined()) return fused;
  const at::Tensor xf = x.to(at::kFloat);
  if (!without_autograd(x, weight)) {
    const at::Tensor variance = xf.pow(2).mean(-1, /*keepdim=*/true);
    return weight * (xf * at::rsqrt(variance + eps)).to(x.scalar_type());
  }
  // The same ops and values, with fewer temporaries (decode runs this 2L + 1 times a step).
  at::Tensor normed = xf * xf.pow(2).mean(-1, /*keepdim=*/true).add_(eps).rsqrt_();
  normed = normed.to(x.scalar_type());
  if (normed.scalar_type() != weight.scalar_type() || normed.sizes() != x.sizes()) return weight * normed;
  return normed.mul_(weight);
}

void RmsNorm::collect(const std::string& prefix, ParameterSlots& out) {
  if (weight.defined()) out.emplace_back(prefix + ".weight", &weight);
}

namespace {

// Llama 3.1: keep high frequencies, divide low ones by factor, interpolate between.
at::Tensor llama3_inv_freq(const at::Tensor& inv_freq, const RopeScaling& scaling) {
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

// YaRN: extrapolated frequencies above the correction range, interpolated
// (divided by factor) below it, a linear ramp between; HF's op order.
at::Tensor yarn_inv_freq(const at::Tensor& pos_freqs, int64_t dim, double base, const RopeScaling& scaling) {
  const auto correction_dim = [&](double rotations) {
    return dim * std::log(static_cast<double>(scaling.original_max_position_embeddings) / (rotations * 2 * M_PI)) /
           (2 * std::log(base));
  };
  double low = correction_dim(scaling.beta_fast);
  double high = correction_dim(scaling.beta_slow);
  if (scaling.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // HF: prevents a division by zero
  const at::Tensor ramp = ((at::arange(dim / 2, at::kFloat) - low) / (high - low)).clamp(0, 1);
  const at::Tensor extrapolation_weight = 1 - ramp;
  const at::Tensor extrapolated = 1.0 / pos_freqs;
  const at::Tensor interpolated = 1.0 / (scaling.factor * pos_freqs);
  return interpolated * (1 - extrapolation_weight) + extrapolated * extrapolation_weight;
}

}  // namespace

at::Tensor rope_inv_freq(const ModelConfig& config) {
  const int64_t dim = config.head_dim;
  // Written as HF writes it (1 / theta ** (arange(0, d, 2) / d)) for bitwise-equal values.
  const at::Tensor exponent = at::arange(0, dim, 2, at::kLong).to(at::kFloat) / static_cast<double>(dim);
  const RopeScaling& scaling = config.rope_scaling;
  if (scaling.rope_type == "yarn") {
    return yarn_inv_freq(at::pow(config.rope_theta, exponent), dim, config.rope_theta, scaling);
  }
  const at::Tensor inv_freq = at::reciprocal(at::pow(config.rope_theta, exponent));
  if (scaling.rope_type == "linear") return inv_freq / scaling.factor;
  if (scaling.rope_type == "llama3") return llama3_inv_freq(inv_freq, scaling);
  return inv_freq;
}

RotaryEmbedding::RotaryEmbedding(const ModelConfig& config, const at::Device& device)
    : inv_freq_(rope_inv_freq(config).to(device)),
      attention_scaling_(config.rope_scaling.rope_type == "yarn" ? config.rope_scaling.attention_factor : 1.0) {}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::cos_sin(const at::Tensor& position_ids,
                                                           c10::ScalarType dtype) const {
  const at::Tensor freqs = position_ids.to(at::kFloat).unsqueeze(-1) * inv_freq_;
  const at::Tensor angles = at::cat({freqs, freqs}, -1);
  if (attention_scaling_ == 1.0) return {angles.cos().to(dtype), angles.sin().to(dtype)};
  return {(angles.cos() * attention_scaling_).to(dtype), (angles.sin() * attention_scaling_).to(dtype)};
}

at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
}

at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  if (at::Tensor fused = cpu::rotary(x, cos, sin); fused.defined()) return fused;
  const at::Tensor c = cos.unsqueeze(1);
  const at::Tensor s = sin.unsqueeze(1);
  return x * c + rotate_half(x) * s;
}

at::Tensor apply_rotary_interleaved(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  // cos and sin are cat(freqs, freqs): the first half holds each pair's angle.
  const int64_t half = cos.size(-1) / 2;
  const at::Tensor c = cos.slice(-1, 0, half).unsqueeze(1);
  const at::Tensor s = sin.slice(-1, 0, half).unsqueeze(1);
  const at::Tensor even = x.slice(-1, 0, x.size(-1), 2);
  const at::Tensor odd = x.slice(-1, 1, x.size(-1), 2);
  return at::cat({even * c - odd * s, odd * c + even * s}, -1);
}

std::pair<at::Tensor, at::Tensor> append_to_cache(const ForwardContext& ctx, int64_t layer, const at::Tensor& k,
                                                  const at::Tensor& v) {
  if (ctx.cache == nullptr) return {k, v};
  at::Tensor& keys = ctx.cache->keys[layer];
  at::Tensor& values = ctx.cache->values[layer];
  if (ctx.cache_slot.defined()) {
    keys.index_copy_(2, ctx.cache_slot, k);
    values.index_copy_(2, ctx.cache_slot, v);
    return {keys, values};
  }
  const int64_t end = ctx.cache_offset + k.size(2);
  keys.slice(2, ctx.cache_offset, end).copy_(k);
  values.slice(2, ctx.cache_offset, end).copy_(v);
  return {keys.slice(2, 0, end), values.slice(2, 0, end)};
}

at::Tensor grouped_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& blocked,
                             double scaling, double softcap) {
  if (softcap == 0.0 && takes_exact_path(q, k)) return exact_attention_trainable(q, k, v, blocked, scaling);
  if (softcap == 0.0) {  // the fused kernels have no soft-capping
    if (at::Tensor fused = cpu::decode_attention(q, k, v, blocked, scaling); fused.defined()) return fused;
    if (at::Tensor fused = fused_grouped_attention(q, k, v, blocked, scaling); fused.defined()) return fused;
  }
  return aten_grouped_attention(q, k, v, blocked, scaling, softcap);
}

at::Tensor aten_grouped_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const at::Tensor& blocked, double scaling, double softcap) {
  const int64_t batch = q.size(0);
  const int64_t num_heads = q.size(1);
  const int64_t len = q.size(2);
  const int64_t head_dim = q.size(3);
  const int64_t num_kv_heads = k.size(1);
  const int64_t keys_len = k.size(2);
  // [B, H, T, D] -> [B, KV, G*T, D]: query heads h of group g = h / G share kv head g.
  const int64_t groups = num_heads / num_kv_heads;
  const at::Tensor q_grouped = q.reshape({batch, num_kv_heads, groups * len, head_dim});
  at::Tensor scores = at::matmul(q_grouped, k.transpose(-1, -2)) * scaling;
  if (softcap != 0.0) scores = at::tanh(scores / softcap) * softcap;  // HF: in the compute dtype
  scores = scores.view({batch, num_heads, len, keys_len}).to(at::kFloat);
  // A finite fill (HF uses finfo.min) keeps fully masked rows (padding
  // queries) uniform instead of NaN, so a masked loss never sees NaN.
  // Undefined: no key is blocked (a decode step over a cache without padding).
  if (blocked.defined()) scores = scores.masked_fill(blocked, std::numeric_limits<float>::lowest());
  const at::Tensor probs = at::softmax(scores, -1).to(q.scalar_type());
  const at::Tensor out = at::matmul(probs.view({batch, num_kv_heads, groups * len, keys_len}), v);
  return out.view({batch, num_heads, len, v.size(3)}).transpose(1, 2).reshape({batch, len, -1});
}

namespace {

// The packed row's sequences as a padded batch [S, heads, longest, D]: slot
// `longest` of a shorter sequence holds zeros. `gather` indexes [S * longest]
// into the row with one zero slot appended.
at::Tensor as_padded_batch(const at::Tensor& x, const at::Tensor& gather, int64_t sequences, int64_t longest) {
  const at::Tensor row = x.select(0, 0);  // [heads, T, D]
  const at::Tensor with_zero = at::cat({row, at::zeros({row.size(0), 1, row.size(2)}, row.options())}, 1);
  return with_zero.index_select(1, gather).view({row.size(0), sequences, longest, row.size(2)}).transpose(0, 1);
}

// All sequences in one grouped_attention call, padded to the longest: the
// padded path's attention, for many sequences of similar length, where a call
// per sequence would cost more than the padding.
at::Tensor attend_as_batch(const std::vector<int64_t>& offsets, const at::Tensor& q, const at::Tensor& k,
                           const at::Tensor& v, const at::Tensor& blocked, int64_t longest, double scaling,
                           double softcap) {
  const auto sequences = static_cast<int64_t>(offsets.size()) - 1;
  const int64_t tokens = offsets.back();
  std::vector<int64_t> gather, real;
  gather.reserve(static_cast<size_t>(sequences * longest));
  for (int64_t s = 0; s < sequences; ++s) {
    for (int64_t t = 0; t < longest; ++t) {
      const bool inside = offsets[s] + t < offsets[s + 1];
      gather.push_back(inside ? offsets[s] + t : tokens);
      if (inside) real.push_back(s * longest + t);
    }
  }
  const at::TensorOptions index = at::TensorOptions().dtype(at::kLong);
  const at::Tensor gather_index = at::tensor(gather, index).to(q.device());
  const at::Tensor padding = gather_index.eq(tokens).view({sequences, 1, 1, longest});
  const at::Tensor mask = blocked.defined() ? blocked.logical_or(padding) : padding;
  const at::Tensor out = grouped_attention(
      as_padded_batch(q, gather_index, sequences, longest), as_padded_batch(k, gather_index, sequences, longest),
      as_padded_batch(v, gather_index, sequences, longest), mask, scaling, softcap);
  return out.reshape({sequences * longest, -1}).index_select(0, at::tensor(real, index).to(q.device())).unsqueeze(0);
}

// Each packed sequence attends to itself only: on a GPU in 16 bits all at once
// through flash attention's variable-length kernel; otherwise as one padded
// batch or one sequence at a time (its slice of q, k, v under the top-left
// corner of the causal mask), whichever computes fewer scores, a call counted
// as 32 x 32 of them.
at::Tensor attend_packed(const ForwardContext& ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const at::Tensor& blocked, bool sliding, double scaling, double softcap) {
  const std::vector<int64_t>& offsets = ctx.segment_offsets;
  int64_t longest = 0;
  int64_t loop_cost = 0;
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    const int64_t len = offsets[i + 1] - offsets[i];
    longest = std::max(longest, len);
    loop_cost += len * len + 32 * 32;
  }
  if (!sliding && softcap == 0.0) {
    if (at::Tensor fused = flash_varlen_attention(q, k, v, offsets, longest, scaling); fused.defined()) return fused;
  }
  const auto sequences = static_cast<int64_t>(offsets.size()) - 1;
  if (sequences > 1 && sequences * longest * longest <= loop_cost)
    return attend_as_batch(offsets, q, k, v, blocked, longest, scaling, softcap);
  std::vector<at::Tensor> parts;
  parts.reserve(static_cast<size_t>(sequences));
  for (int64_t i = 0; i < sequences; ++i) {
    const int64_t begin = offsets[i];
    const int64_t end = offsets[i + 1];
    const int64_t len = end - begin;
    const at::Tensor mask = blocked.defined() && len > 1 ? blocked.slice(-2, 0, len).slice(-1, 0, len) : at::Tensor();
    parts.push_back(grouped_attention(q.slice(2, begin, end), k.slice(2, begin, end), v.slice(2, begin, end), mask,
                                      scaling, softcap));
  }
  return at::cat(parts, 1);
}

}  // namespace

at::Tensor attend(const ForwardContext& ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  bool sliding, double scaling, double softcap) {
  const at::Tensor& blocked = sliding ? ctx.blocked_sliding : ctx.blocked;
  if (!ctx.packed()) return grouped_attention(q, k, v, blocked, scaling, softcap);
  if (ctx.sequence_parallel == nullptr) return attend_packed(ctx, q, k, v, blocked, sliding, scaling, softcap);
  const ForwardContext::SequenceParallel& sp = *ctx.sequence_parallel;
  const at::Tensor out = attend_packed(ctx, sp.heads_to_sequence(q), sp.heads_to_sequence(k), sp.heads_to_sequence(v),
                                       blocked, sliding, scaling, softcap);
  return sp.sequence_to_heads(out);
}

at::Tensor Attention::operator()(const at::Tensor& x, const ForwardContext& ctx, int64_t layer) const {
  const int64_t batch = x.size(0);
  const int64_t len = x.size(1);
  const std::vector<at::Tensor> qkv = project({&q_proj, &k_proj, &v_proj}, x);
  at::Tensor q = qkv[0].view({batch, len, num_heads, head_dim});
  at::Tensor k = qkv[1].view({batch, len, num_kv_heads, head_dim});
  at::Tensor v = qkv[2].view({batch, len, num_kv_heads, head_dim}).transpose(1, 2);
  if (q_norm.weight.defined()) {
    q = q_norm(q);
    k = k_norm(k);
  }
  q = apply_rotary(q.transpose(1, 2), ctx.cos, ctx.sin);
  k = apply_rotary(k.transpose(1, 2), ctx.cos, ctx.sin);
  std::tie(k, v) = append_to_cache(ctx, layer, k, v);
  return o_proj(attend(ctx, q, k, v, sliding, scaling, softcap));
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
  const std::vector<at::Tensor> gate_up = project({&gate_proj, &up_proj}, x);
  const at::Tensor activated = gelu_tanh ? at::gelu(gate_up[0], "tanh") : at::silu(gate_up[0]);
  return down_proj(activated * gate_up[1]);
}

void Mlp::collect(const std::string& prefix, ParameterSlots& out) {
  gate_proj.collect(prefix + ".gate_proj", out);
  up_proj.collect(prefix + ".up_proj", out);
  down_proj.collect(prefix + ".down_proj", out);
}

namespace {

// DeepSeek-V3's router (HF DeepseekV3TopkRouter, its op order), in fp32.
Routed route_within_groups(const SparseMoe& moe, const at::Tensor& tokens, const at::Tensor& replay) {
  Routed routed;
  routed.router_logits = at::linear(tokens.to(at::kFloat), moe.gate.weight.to(at::kFloat));
  const at::Tensor scores = routed.router_logits.sigmoid();
  if (replay.defined()) {
    routed.chosen = replay.to(tokens.device(), at::kLong);
  } else {
    const int64_t num_tokens = scores.size(0);
    const int64_t num_experts = scores.size(1);
    const int64_t group_size = num_experts / moe.n_group;
    const at::Tensor for_choice = scores + moe.e_score_correction_bias.to(at::kFloat);
    const at::Tensor group_scores =
        std::get<0>(for_choice.view({num_tokens, moe.n_group, group_size}).topk(2, -1)).sum(-1);
    const at::Tensor best_groups = std::get<1>(at::topk(group_scores, moe.topk_group, -1, true, /*sorted=*/false));
    const at::Tensor in_best_group = at::zeros_like(group_scores)
                                         .scatter_(1, best_groups, 1)
                                         .unsqueeze(-1)
                                         .expand({num_tokens, moe.n_group, group_size})
                                         .reshape({num_tokens, num_experts})
                                         .to(at::kBool);
    const at::Tensor candidates = for_choice.masked_fill(in_best_group.logical_not(), -INFINITY);
    routed.chosen = std::get<1>(at::topk(candidates, moe.top_k, -1, true, /*sorted=*/false));
  }
  routed.weights = scores.gather(1, routed.chosen);
  if (moe.norm_topk_prob) routed.weights = routed.weights / (routed.weights.sum(-1, /*keepdim=*/true) + 1e-20);
  routed.weights = routed.weights * moe.routed_scaling_factor;
  return routed;
}

}  // namespace

Routed SparseMoe::route(const at::Tensor& tokens, const at::Tensor& replay) const {
  if (style == Style::kDeepseekV3) return route_within_groups(*this, tokens, replay);
  Routed routed;
  routed.router_logits = gate(tokens);
  const at::Tensor probs = at::softmax(routed.router_logits, -1, at::kFloat);
  std::tie(routed.weights, routed.chosen) = at::topk(probs, top_k, -1);  // [N, top_k]
  if (replay.defined()) {
    const at::Tensor forced = replay.to(tokens.device(), at::kLong);
    routed.chosen = at::where(forced.ge(0), forced, routed.chosen);
    routed.weights = probs.gather(-1, routed.chosen);
  }
  if (norm_topk_prob) routed.weights = routed.weights / routed.weights.sum(-1, /*keepdim=*/true);
  if (style == Style::kQwen3Moe) routed.weights = routed.weights.to(tokens.scalar_type());
  return routed;
}

at::Tensor SparseMoe::apply_experts(const at::Tensor& tokens, const Routed& routed) const {
  const int64_t num_experts = static_cast<int64_t>(experts.size());
  const int64_t k = routed.chosen.size(1);
  // The (token, choice) pairs sorted by expert: expert e's tokens are one slice.
  const at::Tensor flat_chosen = routed.chosen.reshape(-1);
  const at::Tensor order = std::get<1>(flat_chosen.sort(/*stable=*/c10::optional<bool>(true), /*dim=*/0));
  const at::Tensor token_of = order.div(k, "floor");
  const at::Tensor weight_of = routed.weights.reshape(-1).index_select(0, order);
  const at::Tensor counts = at::bincount(flat_chosen, {}, num_experts).cpu();
  at::Tensor out = at::zeros_like(tokens);
  int64_t start = 0;
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t n = counts.data_ptr<int64_t>()[e];
    if (n == 0) continue;
    const at::Tensor rows = token_of.slice(0, start, start + n);
    const at::Tensor y = experts[static_cast<size_t>(e)](tokens.index_select(0, rows));
    out.index_add_(0, rows, (y * weight_of.slice(0, start, start + n).unsqueeze(-1)).to(out.scalar_type()));
    start += n;
  }
  return out;
}

at::Tensor SparseMoe::operator()(const at::Tensor& x, Routed* record, const at::Tensor& replay) const {
  const at::Tensor tokens = x.reshape({-1, x.size(-1)});
  Routed routed = route(tokens, replay);
  at::Tensor out = experts_override ? experts_override(*this, tokens, routed) : apply_experts(tokens, routed);
  if (shared_experts.down_proj.weight.defined()) out = out + shared_experts(tokens);
  if (record != nullptr) *record = std::move(routed);
  return out.reshape(x.sizes());
}

void SparseMoe::collect(const std::string& prefix, ParameterSlots& out) {
  gate.collect(prefix + ".gate", out);
  if (e_score_correction_bias.defined())
    out.emplace_back(prefix + ".gate.e_score_correction_bias", &e_score_correction_bias);
  for (size_t e = 0; e < experts.size(); ++e) {
    const std::string expert = prefix + ".experts." + std::to_string(e);
    experts[e].gate_proj.collect(expert + "." + names.gate_proj, out);
    experts[e].up_proj.collect(expert + "." + names.up_proj, out);
    experts[e].down_proj.collect(expert + "." + names.down_proj, out);
  }
  shared_experts.collect(prefix + ".shared_experts", out);
}

at::Tensor DecoderLayer::operator()(const at::Tensor& x, const ForwardContext& ctx, int64_t layer) const {
  const auto feed_forward = [&](const at::Tensor& h) {
    if (moe.experts.empty()) return mlp(h);
    const auto index = static_cast<size_t>(layer);
    const at::Tensor replay =
        ctx.replay != nullptr && index < ctx.replay->chosen.size() ? ctx.replay->chosen[index] : at::Tensor();
    if (ctx.routing == nullptr) return moe(h, nullptr, replay);
    MoeRouting& routing = *ctx.routing;
    if (routing.chosen.size() <= index) {
      routing.chosen.resize(index + 1);
      routing.router_logits.resize(index + 1);
    }
    Routed routed;
    const at::Tensor out = moe(h, &routed, replay);
    routing.chosen[index] = std::move(routed.chosen);
    routing.router_logits[index] = std::move(routed.router_logits);
    return out;
  };
  if (post_feedforward_layernorm.weight.defined()) {
    const at::Tensor h = x + post_attention_layernorm(self_attn(input_layernorm(x), ctx, layer));
    return h + post_feedforward_layernorm(feed_forward(pre_feedforward_layernorm(h)));
  }
  const at::Tensor normed = input_layernorm(x);
  const at::Tensor h = x + (latent_attn.defined() ? latent_attn(normed, ctx, layer) : self_attn(normed, ctx, layer));
  return h + feed_forward(post_attention_layernorm(h));
}

void DecoderLayer::collect(const std::string& prefix, ParameterSlots& out) {
  input_layernorm.collect(prefix + "input_layernorm", out);
  self_attn.collect(prefix + "self_attn", out);
  latent_attn.collect(prefix + "self_attn", out);
  post_attention_layernorm.collect(prefix + "post_attention_layernorm", out);
  pre_feedforward_layernorm.collect(prefix + "pre_feedforward_layernorm", out);
  post_feedforward_layernorm.collect(prefix + "post_feedforward_layernorm", out);
  if (moe.experts.empty()) {
    mlp.collect(prefix + "mlp", out);
  } else {
    moe.collect(prefix + moe.name(), out);
  }
}

namespace {

Linear make_linear(at::Tensor weight, bool bias, const at::TensorOptions& options) {
  Linear linear;
  if (bias) linear.bias = at::empty({weight.size(0)}, options);
  linear.weight = std::move(weight);
  return linear;
}

Linear make_linear(int64_t in, int64_t out, bool bias, const at::TensorOptions& options) {
  return make_linear(at::empty({out, in}, options), bias, options);
}

// [rows[i], in] weights as consecutive row blocks of one allocation, so
// project() can run them as one GEMM.
std::vector<at::Tensor> adjacent_matrices(const std::vector<int64_t>& rows, int64_t in,
                                          const at::TensorOptions& options) {
  int64_t total = 0;
  for (int64_t r : rows) total += r;
  const at::Tensor block = at::empty({total, in}, options);
  std::vector<at::Tensor> parts;
  int64_t start = 0;
  for (int64_t r : rows) {
    parts.push_back(block.narrow(0, start, r));
    start += r;
  }
  return parts;
}

RmsNorm make_norm(const ModelConfig& c, int64_t dim, const at::TensorOptions& options) {
  return RmsNorm{at::empty({dim}, options), c.rms_norm_eps, c.norm_weight_offset};
}

// A gated MLP of `intermediate` (gate and up adjacent, so they run as one GEMM).
Mlp make_mlp(const ModelConfig& c, int64_t intermediate, const at::TensorOptions& options) {
  Mlp mlp;
  std::vector<at::Tensor> gate_up = adjacent_matrices({intermediate, intermediate}, c.hidden_size, options);
  mlp.gate_proj = make_linear(std::move(gate_up[0]), c.mlp_bias, options);
  mlp.up_proj = make_linear(std::move(gate_up[1]), c.mlp_bias, options);
  mlp.down_proj = make_linear(intermediate, c.hidden_size, c.mlp_bias, options);
  mlp.gelu_tanh = c.hidden_act == "gelu_pytorch_tanh";
  return mlp;
}

LatentAttention make_latent_attention(const ModelConfig& c, const at::TensorOptions& options) {
  LatentAttention attn;
  const int64_t q_dim = c.num_attention_heads * c.qk_head_dim();
  // HF builds these norms with DeepseekV3RMSNorm's default eps, not rms_norm_eps.
  const auto latent_norm = [&](int64_t dim) { return RmsNorm{at::empty({dim}, options), 1e-6, false}; };
  if (c.q_lora_rank) {
    attn.q_a_proj = make_linear(c.hidden_size, *c.q_lora_rank, c.qkv_bias, options);
    attn.q_a_layernorm = latent_norm(*c.q_lora_rank);
    attn.q_b_proj = make_linear(*c.q_lora_rank, q_dim, false, options);
  } else {
    attn.q_proj = make_linear(c.hidden_size, q_dim, false, options);
  }
  attn.kv_a_proj_with_mqa = make_linear(c.hidden_size, c.kv_lora_rank + c.head_dim, c.qkv_bias, options);
  attn.kv_a_layernorm = latent_norm(c.kv_lora_rank);
  attn.kv_b_proj =
      make_linear(c.kv_lora_rank, c.num_attention_heads * (c.qk_nope_head_dim + c.v_head_dim), false, options);
  attn.o_proj = make_linear(c.num_attention_heads * c.v_head_dim, c.hidden_size, c.o_proj_bias, options);
  attn.num_heads = c.num_attention_heads;
  attn.qk_nope_head_dim = c.qk_nope_head_dim;
  attn.rope_head_dim = c.head_dim;
  attn.v_head_dim = c.v_head_dim;
  attn.kv_lora_rank = c.kv_lora_rank;
  attn.rope_interleave = c.rope_interleave;
  attn.scaling = c.attention_scaling();
  return attn;
}

// DeepSeek-V3's part of a sparse block: its router's bias and groups, the shared experts.
void add_deepseek_v3_routing(const ModelConfig& c, const at::TensorOptions& options, SparseMoe& moe) {
  moe.style = SparseMoe::Style::kDeepseekV3;
  moe.e_score_correction_bias = at::empty({c.num_experts}, options);
  moe.n_group = c.n_group;
  moe.topk_group = c.topk_group;
  moe.routed_scaling_factor = c.routed_scaling_factor;
  moe.shared_experts = make_mlp(c, c.moe_intermediate_size * c.n_shared_experts, options);
}

// Grouped-query attention with fused-GEMM q/k/v (all but DeepSeek-V3).
Attention make_attention(const ModelConfig& c, const at::TensorOptions& options, int64_t index) {
  Attention attn;
  const int64_t q_dim = c.num_attention_heads * c.head_dim;
  const int64_t kv_dim = c.num_key_value_heads * c.head_dim;
  std::vector<at::Tensor> qkv = adjacent_matrices({q_dim, kv_dim, kv_dim}, c.hidden_size, options);
  attn.q_proj = make_linear(std::move(qkv[0]), c.qkv_bias, options);
  attn.k_proj = make_linear(std::move(qkv[1]), c.qkv_bias, options);
  attn.v_proj = make_linear(std::move(qkv[2]), c.qkv_bias, options);
  attn.o_proj = make_linear(q_dim, c.hidden_size, c.o_proj_bias, options);
  if (c.qk_norm) {
    attn.q_norm = make_norm(c, c.head_dim, options);
    attn.k_norm = make_norm(c, c.head_dim, options);
  }
  attn.num_heads = c.num_attention_heads;
  attn.num_kv_heads = c.num_key_value_heads;
  attn.head_dim = c.head_dim;
  attn.scaling = c.attention_scaling();
  attn.softcap = c.attn_logit_softcapping.value_or(0.0);
  attn.sliding = c.layer_slides(index);
  return attn;
}

}  // namespace

DecoderLayer make_decoder_layer(const ModelConfig& c, const at::TensorOptions& options, int64_t index) {
  DecoderLayer layer;
  layer.input_layernorm = make_norm(c, c.hidden_size, options);
  layer.post_attention_layernorm = make_norm(c, c.hidden_size, options);
  if (c.sandwich_norms) {
    layer.pre_feedforward_layernorm = make_norm(c, c.hidden_size, options);
    layer.post_feedforward_layernorm = make_norm(c, c.hidden_size, options);
  }
  if (c.latent_attention()) {
    layer.latent_attn = make_latent_attention(c, options);
  } else {
    layer.self_attn = make_attention(c, options, index);
  }
  if (c.layer_is_sparse(index)) {
    layer.moe.gate = make_linear(c.hidden_size, c.num_experts, false, options);
    for (int64_t e = 0; e < c.num_experts; ++e)
      layer.moe.experts.push_back(make_mlp(c, c.moe_intermediate_size, options));
    layer.moe.top_k = c.num_experts_per_tok;
    layer.moe.norm_topk_prob = c.norm_topk_prob;
    const Architecture& arch = c.architecture();
    layer.moe.style = arch.layers.moe_style;
    layer.moe.names = arch.hf_moe_names;
    if (layer.moe.style == MoeStyle::kDeepseekV3) add_deepseek_v3_routing(c, options, layer.moe);
  } else {
    layer.mlp = make_mlp(c, c.intermediate_size, options);
  }
  return layer;
}

}  // namespace rlcore::model
