// Transformer: parameter naming/loading/init and the full-sequence and
// KV-cache forwards (masks and positions built once per call, shared by layers).
#include "rlcore/model/transformer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/CPUGeneratorImpl.h>

#include "rlcore/error.h"
#include "rlcore/model/architecture.h"
#include "rlcore/string_join.h"

namespace rlcore::model {
namespace {

std::string dims_text(at::IntArrayRef shape) {
  return "[" + join(shape, ", ", [](int64_t d) { return std::to_string(d); }) + "]";
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void check_tokens(const char* what, const at::Tensor& tensor, const at::Tensor& input_ids) {
  if (tensor.defined() && tensor.sizes() != input_ids.sizes()) {
    throw ValueError(std::string(what) + " has shape " + dims_text(tensor.sizes()) + ", expected input_ids' shape " +
                     dims_text(input_ids.sizes()));
  }
}

// Some checkpoints (DeepSeek-V3's) hold multi-token-prediction modules as layers
// after the last one (model.layers.61.* in DeepSeek-V3); HF ignores them, so do we.
bool is_multi_token_prediction_layer(const ModelConfig& config, const std::string& name) {
  const std::string prefix = "model.layers.";
  if (!config.architecture().multi_token_prediction_layers || name.rfind(prefix, 0) != 0) return false;
  const size_t end = name.find('.', prefix.size());
  if (end == std::string::npos) return false;
  const std::string index = name.substr(prefix.size(), end - prefix.size());
  if (index.empty() || index.size() > 9 || index.find_first_not_of("0123456789") != std::string::npos) return false;
  return std::stoll(index) >= config.num_hidden_layers;
}

}  // namespace

std::vector<ParameterSpec> parameter_specs(const ModelConfig& config, ModelHead head) {
  // Meta tensors: the real constructor's shapes without allocating memory.
  Transformer model(config, head, at::TensorOptions().device(at::kMeta));
  std::vector<ParameterSpec> specs;
  for (const auto& [name, slot] : model.parameter_slots()) specs.push_back({name, slot->sizes().vec()});
  return specs;
}

int64_t num_parameters(const ModelConfig& config, ModelHead head) {
  int64_t total = 0;
  for (const ParameterSpec& spec : parameter_specs(config, head)) {
    int64_t count = 1;
    for (int64_t d : spec.shape) count *= d;
    total += count;
  }
  return total;
}

Transformer::Transformer(ModelConfig config, ModelHead head_kind, const at::TensorOptions& options)
    : config_(std::move(config)), head_kind_(head_kind), options_(options) {
  config_.validate("Transformer");
  const ModelConfig& c = config_;
  embed_tokens = at::empty({c.vocab_size, c.hidden_size}, options_);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers.push_back(make_decoder_layer(c, options_, i));
  norm = RmsNorm{at::empty({c.hidden_size}, options_), c.rms_norm_eps, c.norm_weight_offset};
  if (head_kind_ == ModelHead::kValue) {
    head.weight = at::empty({1, c.hidden_size}, options_);
    head.bias = at::empty({1}, options_);
  } else if (!c.tie_word_embeddings) {
    head.weight = at::empty({c.vocab_size, c.hidden_size}, options_);
  }
  // inv_freq is built on CPU (meta has no values) and moved, so every device agrees.
  rotary = RotaryEmbedding(c, options_.device().is_meta() ? at::Device(at::kCPU) : options_.device());
}

ParameterSlots Transformer::parameter_slots() {
  ParameterSlots slots;
  slots.emplace_back("model.embed_tokens.weight", &embed_tokens);
  for (size_t i = 0; i < layers.size(); ++i) layers[i].collect("model.layers." + std::to_string(i) + ".", slots);
  norm.collect("model.norm", slots);
  head.collect(head_kind_ == ModelHead::kValue ? "score" : "lm_head", slots);
  return slots;
}

NamedTensors Transformer::named_parameters() const {
  NamedTensors out;
  // parameter_slots() only hands out tensor handles; nothing is modified.
  for (const auto& [name, slot] : const_cast<Transformer*>(this)->parameter_slots()) out.emplace_back(name, *slot);
  return out;
}

void Transformer::set_requires_grad(bool requires_grad) {
  for (const auto& entry : parameter_slots()) entry.second->set_requires_grad(requires_grad);
}

void Transformer::init_random(uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::NoGradGuard no_grad;
  for (const auto& [name, slot] : parameter_slots()) {
    if (ends_with(name, "norm.weight")) {
      slot->fill_(config_.norm_weight_offset ? 0.0 : 1.0);                                 // both scale by 1
    } else if (ends_with(name, ".bias") || ends_with(name, ".e_score_correction_bias")) {  // HF zeroes both
      slot->zero_();
    } else {
      at::Tensor values = at::empty(slot->sizes(), at::kFloat);
      values.normal_(0.0, config_.initializer_range, generator);
      slot->copy_(values);
    }
  }
  // HF zeroes the padding row of nn.Embedding(padding_idx=pad_token_id).
  const auto pad = config_.pad_token_id;
  if (pad && *pad >= 0 && *pad < config_.vocab_size) embed_tokens[*pad].zero_();
}

void Transformer::load(const NamedTensors& tensors, LoadMode mode) {
  std::map<std::string, at::Tensor*> slots;
  for (const auto& [name, slot] : parameter_slots()) slots.emplace(name, slot);
  const std::string model_name = config_.model_type + " model";
  std::vector<std::pair<at::Tensor*, const at::Tensor*>> copies;
  std::set<std::string> seen;
  // Validate everything before copying anything: a failed load leaves the model as it was.
  for (const auto& [name, tensor] : tensors) {
    if (ends_with(name, "rotary_emb.inv_freq")) continue;                   // a buffer in old HF checkpoints
    if (is_multi_token_prediction_layer(config_, name)) continue;           // DeepSeek-V3's MTP modules, as HF
    if (name == "lm_head.weight" && config_.tie_word_embeddings) continue;  // HF ties it
    auto it = slots.find(name);
    if (it == slots.end()) throw ValueError("unexpected tensor '" + name + "': not a parameter of this " + model_name);
    if (!seen.insert(name).second) throw ValueError("tensor '" + name + "' given twice");
    if (!tensor.defined() || tensor.sizes() != it->second->sizes()) {
      throw ValueError("tensor '" + name + "' has shape " +
                       (tensor.defined() ? dims_text(tensor.sizes()) : std::string("<undefined>")) + ", expected " +
                       dims_text(it->second->sizes()));
    }
    copies.emplace_back(it->second, &tensor);
  }
  if (mode == LoadMode::kStrict && seen.size() != slots.size()) {
    std::string missing;
    int64_t count = 0;
    for (const auto& entry : slots) {
      if (seen.count(entry.first)) continue;
      if (count++ < 5) missing += (missing.empty() ? "'" : ", '") + entry.first + "'";
    }
    throw ValueError("missing " + std::to_string(count) + " tensor(s) for the " + model_name + ": " + missing +
                     (count > 5 ? ", ..." : ""));
  }
  at::NoGradGuard no_grad;
  for (const auto& [slot, tensor] : copies) slot->copy_(*tensor);
}

KvCache Transformer::make_cache(int64_t batch_size, int64_t max_len) const {
  // Sized by the layers' kv heads: a tensor-parallel engine sets local counts.
  ModelConfig local = config_;
  if (!layers.empty() && !config_.latent_attention()) local.num_key_value_heads = layers.front().self_attn.num_kv_heads;
  return KvCache(local, batch_size, max_len, options_);
}

ForwardContext Transformer::prepare(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                    const at::Tensor& position_ids, KvCache* cache) const {
  if (!input_ids.defined() || input_ids.dim() != 2 || !at::isIntegralType(input_ids.scalar_type(), false)) {
    throw ValueError("input_ids must be an integer tensor [batch, tokens], got " +
                     (input_ids.defined()
                          ? dims_text(input_ids.sizes()) + " " + std::string(c10::toString(input_ids.scalar_type()))
                          : std::string("<undefined>")));
  }
  check_tokens("attention_mask", attention_mask, input_ids);
  check_tokens("position_ids", position_ids, input_ids);
  const int64_t batch = input_ids.size(0);
  const int64_t len = input_ids.size(1);
  const at::TensorOptions on_device = at::TensorOptions().device(input_ids.device());
  const at::Tensor mask = attention_mask.defined() ? attention_mask.to(at::kBool) : at::Tensor();
  const int64_t offset = cache != nullptr ? cache->used : 0;
  if (cache != nullptr) {
    if (cache->batch_size() != batch) {
      throw ValueError("KV cache holds " + std::to_string(cache->batch_size()) + " rows, input_ids has shape " +
                       dims_text(input_ids.sizes()));
    }
    if (offset + len > cache->max_len()) {
      throw ValueError("KV cache full: " + std::to_string(offset) + " + " + std::to_string(len) +
                       " tokens exceed max_len " + std::to_string(cache->max_len()));
    }
  }

  ForwardContext ctx;
  at::Tensor positions = position_ids;
  if (!positions.defined() && !mask.defined() && cache != nullptr && len == 1) {
    positions = cache->lengths.unsqueeze(1);  // a decode step: the next position of every row
  } else if (!positions.defined()) {
    // HF: cumsum(mask) - 1, padding set to 1 (any value: padding is never attended to).
    positions = mask.defined() ? mask.to(at::kLong).cumsum(-1) - 1
                               : at::arange(len, on_device.dtype(at::kLong)).unsqueeze(0).expand({batch, len});
    if (mask.defined()) positions = positions.masked_fill(mask.logical_not(), 1);
    if (cache != nullptr) positions = positions + cache->lengths.unsqueeze(1);
  }
  std::tie(ctx.cos, ctx.sin) = rotary.cos_sin(positions, options_.dtype().toScalarType());

  at::Tensor key_valid = mask;
  if (cache != nullptr) {
    if (mask.defined()) {
      cache->valid.slice(1, offset, offset + len).copy_(mask);
      cache->lengths += mask.sum(1);
    } else {
      cache->valid.slice(1, offset, offset + len).fill_(true);
      cache->lengths.add_(len);
    }
    cache->used += len;
    key_valid = cache->valid.slice(1, 0, offset + len);
    ctx.cache = cache;
    ctx.cache_offset = offset;
  }
  // On CPU a check is cheaper than masking every layer's scores; elsewhere it would sync.
  if (key_valid.defined() && key_valid.device().is_cpu() && key_valid.all().item<bool>()) key_valid = at::Tensor();
  // Query t sits at slot offset + t; it must not see later slots, nor, in a
  // sliding layer, slots `window` or more before it (counted in slots, as HF
  // counts cache positions).
  const at::Tensor key_slots = at::arange(offset + len, on_device.dtype(at::kLong)).unsqueeze(0);
  const at::Tensor query_slots = (at::arange(len, on_device.dtype(at::kLong)) + offset).unsqueeze(1);
  at::Tensor blocked;  // undefined: every query sees every key
  if (len > 1) blocked = (key_slots > query_slots).view({1, 1, len, offset + len});
  at::Tensor blocked_sliding = blocked;
  if (config_.sliding_window && offset + len > *config_.sliding_window) {
    const at::Tensor outside = (query_slots - key_slots >= *config_.sliding_window).view({1, 1, len, offset + len});
    blocked_sliding = blocked.defined() ? blocked.logical_or(outside) : outside;
  }
  if (key_valid.defined()) {
    const at::Tensor invalid = key_valid.logical_not().view({batch, 1, 1, -1});
    blocked = blocked.defined() ? blocked.logical_or(invalid) : invalid;
    blocked_sliding = blocked_sliding.defined() ? blocked_sliding.logical_or(invalid) : invalid;
  }
  ctx.blocked = blocked;
  if (config_.sliding_window) ctx.blocked_sliding = blocked_sliding;
  return ctx;
}

ForwardContext Transformer::prepare_packed(const at::Tensor& position_ids, const std::vector<int64_t>& lengths) const {
  if (!position_ids.defined() || position_ids.dim() != 2 || position_ids.size(0) != 1 ||
      !at::isIntegralType(position_ids.scalar_type(), false)) {
    throw ValueError("a packed forward needs position_ids [1, tokens] (integer), got " +
                     (position_ids.defined() ? dims_text(position_ids.sizes()) : std::string("<undefined>")));
  }
  ForwardContext ctx;
  ctx.segment_offsets.reserve(lengths.size() + 1);
  ctx.segment_offsets.push_back(0);
  int64_t longest = 0;
  for (const int64_t len : lengths) {
    if (len < 1) throw ValueError("a packed sequence must hold at least one token, got " + std::to_string(len));
    ctx.segment_offsets.push_back(ctx.segment_offsets.back() + len);
    longest = std::max(longest, len);
  }
  std::tie(ctx.cos, ctx.sin) = rotary.cos_sin(position_ids, options_.dtype().toScalarType());
  if (longest > 1) {
    const at::Tensor slots = at::arange(longest, at::TensorOptions().dtype(at::kLong).device(position_ids.device()));
    const at::Tensor query = slots.unsqueeze(1);
    const at::Tensor key = slots.unsqueeze(0);
    ctx.blocked = (key > query).view({1, 1, longest, longest});
    if (config_.sliding_window)
      ctx.blocked_sliding =
          ctx.blocked.logical_or((query - key >= *config_.sliding_window).view({1, 1, longest, longest}));
  }
  return ctx;
}

at::Tensor Transformer::embed(const at::Tensor& input_ids) const {
  // padding_idx only stops the pad row's gradient, as in HF's nn.Embedding.
  const auto pad = config_.pad_token_id;
  const int64_t padding_idx = pad && *pad >= 0 && *pad < config_.vocab_size ? *pad : -1;
  const at::Tensor embedded = at::embedding(embed_tokens, input_ids, padding_idx);
  if (!config_.scale_embeddings) return embedded;
  // Gemma: times sqrt(hidden), the factor rounded to the weights' dtype first (as HF).
  const double scale = std::sqrt(static_cast<double>(config_.hidden_size));
  return embedded * at::scalar_tensor(scale, at::kFloat).to(embedded.scalar_type());
}

at::Tensor Transformer::hidden_states(const at::Tensor& input_ids, const ForwardContext& ctx) const {
  at::Tensor h = embed(input_ids);
  for (size_t i = 0; i < layers.size(); ++i) h = layers[i](h, ctx, static_cast<int64_t>(i));
  return norm(h);
}

at::Tensor Transformer::hidden_states(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                      const at::Tensor& position_ids) const {
  return hidden_states(input_ids, prepare(input_ids, attention_mask, position_ids, nullptr));
}

at::Tensor Transformer::apply_head(const at::Tensor& hidden) const {
  if (head_kind_ == ModelHead::kValue) return head(hidden).squeeze(-1);
  at::Tensor logits;
  if (config_.tie_word_embeddings) {
    Linear tied = head;  // keeps a TP engine's forward_override
    tied.weight = embed_tokens;
    logits = tied(hidden);
  } else {
    logits = head(hidden);
  }
  if (const auto cap = config_.final_logit_softcapping) logits = at::tanh(logits / *cap) * *cap;
  return logits;
}

at::Tensor Transformer::forward(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                const at::Tensor& position_ids) const {
  return apply_head(hidden_states(input_ids, attention_mask, position_ids));
}

at::Tensor Transformer::forward(const at::Tensor& input_ids, KvCache& cache, const at::Tensor& attention_mask,
                                const at::Tensor& position_ids, int64_t keep_last, MoeRouting* routing) const {
  ForwardContext ctx = prepare(input_ids, attention_mask, position_ids, &cache);
  ctx.routing = routing;
  at::Tensor h = hidden_states(input_ids, ctx);
  if (keep_last > 0 && keep_last < h.size(1)) h = h.slice(1, h.size(1) - keep_last);
  return apply_head(h);
}

at::Tensor Transformer::forward_decode(const at::Tensor& input_ids, KvCache& cache, const at::Tensor& slot,
                                       MoeRouting* routing) const {
  if (!input_ids.defined() || input_ids.dim() != 2 || input_ids.size(1) != 1 ||
      input_ids.size(0) != cache.batch_size()) {
    throw ValueError("forward_decode: input_ids must be [" + std::to_string(cache.batch_size()) +
                     ", 1] (one token per cache row), got " +
                     (input_ids.defined() ? dims_text(input_ids.sizes()) : std::string("<undefined>")));
  }
  if (!slot.defined() || slot.numel() != 1 || slot.scalar_type() != at::kLong ||
      slot.device() != cache.valid.device()) {
    throw ValueError("forward_decode: slot must be a one-element int64 tensor on the cache's device");
  }
  if (cache.used >= cache.max_len()) {
    throw ValueError("KV cache full: " + std::to_string(cache.used) + " + 1 tokens exceed max_len " +
                     std::to_string(cache.max_len()));
  }
  const int64_t batch = input_ids.size(0);
  const int64_t max_len = cache.max_len();
  ForwardContext ctx;
  // Each row's next position is its real-token count, read before it grows.
  std::tie(ctx.cos, ctx.sin) = rotary.cos_sin(cache.lengths.unsqueeze(1), options_.dtype().toScalarType());
  cache.valid.index_fill_(1, slot, true);
  cache.lengths.add_(1);
  ctx.blocked = cache.valid.logical_not().view({batch, 1, 1, max_len});
  if (config_.sliding_window) {
    const at::Tensor key_slots = at::arange(max_len, slot.options());
    const at::Tensor outside = (slot - key_slots >= *config_.sliding_window).view({1, 1, 1, max_len});
    ctx.blocked_sliding = ctx.blocked.logical_or(outside);
  }
  ctx.cache = &cache;
  ctx.cache_slot = slot;
  ctx.routing = routing;
  return apply_head(hidden_states(input_ids, ctx));
}

}  // namespace rlcore::model
