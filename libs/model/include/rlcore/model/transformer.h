// Transformer: the decoder-only LM (embed -> layers -> norm -> lm_head) or
// critic (-> score), with HF parameter names, strict loading and a KV-cache path.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/model/config.h"
#include "rlcore/model/kv_cache.h"
#include "rlcore/model/layers.h"

namespace rlcore::model {

// The same element type as rlcore::NamedTensors (safetensors.h), in order.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

enum class ModelHead {
  kCausalLm,  // *ForCausalLM: lm_head.weight [vocab, hidden] (absent when tied)
  kValue,     // *ForTokenClassification, num_labels = 1 (verl's critic):
              // score.weight [1, hidden] + score.bias [1]
};

struct ParameterSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// Every parameter's HF name and shape, in a fixed order (embeddings, layers,
// norm, head): the order of named_parameters() and of random init.
std::vector<ParameterSpec> parameter_specs(const ModelConfig& config, ModelHead head = ModelHead::kCausalLm);
// Embeddings counted once when tied.
int64_t num_parameters(const ModelConfig& config, ModelHead head = ModelHead::kCausalLm);

enum class LoadMode {
  kStrict,   // every parameter must be present
  kPartial,  // a subset (e.g. one bucket of a weight update); the rest is kept
};

// Copies are shallow (they share the parameter tensors), like a Python reference.
class Transformer {
 public:
  // Allocates uninitialised parameters in options' dtype (fp32 or bf16: the
  // compute dtype) and device; call init_random() or load() next.
  // Parameters do not require grad until set_requires_grad(true).
  explicit Transformer(ModelConfig config, ModelHead head_kind = ModelHead::kCausalLm,
                       const at::TensorOptions& options = {});

  // HF-like init: every weight ~ N(0, initializer_range), biases 0, norms 1,
  // drawn in parameter_specs order from one fp32 CPU generator seeded with
  // `seed`, so the values do not depend on dtype or device.
  void init_random(uint64_t seed);
  // Copies `tensors` (any dtype/device; converted) into the parameters.
  // ValueError naming the tensor for a missing (kStrict), unexpected or
  // wrongly shaped one (with both shapes). Like HF, `lm_head.weight` is ignored
  // when embeddings are tied, and rotary `inv_freq` buffers are ignored.
  void load(const NamedTensors& tensors, LoadMode mode = LoadMode::kStrict);
  // The live parameters (not copies), in parameter_specs order.
  NamedTensors named_parameters() const;
  ParameterSlots parameter_slots();
  void set_requires_grad(bool requires_grad);

  // Full-sequence forward. input_ids [B, T] int64; attention_mask [B, T]
  // (1 = token, 0 = padding), optional; position_ids [B, T], optional: by
  // default cumsum(mask) - 1 (HF), i.e. 0..T-1 without a mask.
  // Returns logits [B, T, vocab] (kCausalLm) or values [B, T] (kValue), in the
  // compute dtype. Outputs at padding positions are finite but meaningless.
  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& attention_mask = {},
                     const at::Tensor& position_ids = {}) const;

  // Incremental forward: appends input_ids [B, T] to `cache` and returns the
  // outputs for the last `keep_last` new positions (0 = all T). For batched
  // generation pass left-padded prompts with their attention_mask first (HF
  // style: then keep_last = 1 gives every row's next-token logits), then one
  // token per row per step (mask omitted = all real). Positions default to the
  // row's real-token count so far, so they continue across calls. Right-padded
  // prompts work too (padding slots stay masked), but the caller must then read
  // each row's prefill logits at its own last token.
  // `routing`, when given, records what the sparse layers routed (the new positions).
  at::Tensor forward(const at::Tensor& input_ids, KvCache& cache, const at::Tensor& attention_mask = {},
                     const at::Tensor& position_ids = {}, int64_t keep_last = 0, MoeRouting* routing = nullptr) const;

  // One decode step whose shapes do not depend on how full `cache` is, so that
  // it can be recorded once and replayed (rlcore/device_graph.h). input_ids
  // [B, 1] go to the slot that `slot` holds (a one-element int64 tensor on the
  // model's device, equal to cache.used) and attend over every slot of the
  // cache, the unwritten ones blocked through cache.valid. Returns logits
  // [B, 1, vocab]: those of forward(input_ids, cache) up to rounding. Reads no
  // tensor value on the host, so the caller advances cache.used (and `slot`)
  // after each step. Needs every slot before cache.used to hold some row's
  // token, which a left-padded prefill and keep_rows() keep.
  at::Tensor forward_decode(const at::Tensor& input_ids, KvCache& cache, const at::Tensor& slot,
                            MoeRouting* routing = nullptr) const;

  // Sized by the layers' (possibly tensor-parallel local) kv head count.
  KvCache make_cache(int64_t batch_size, int64_t max_len) const;

  // The pieces of forward, for engines that run the layer loop themselves
  // (FSDP gathering one layer at a time, pipeline stages).
  // With a cache, prepare() also reserves the new slots (valid, lengths, used).
  ForwardContext prepare(const at::Tensor& input_ids, const at::Tensor& attention_mask, const at::Tensor& position_ids,
                         KvCache* cache) const;
  // A packed forward without a cache: the sequences of `lengths` back to back
  // in one row, position_ids [1, T] (restarting at each sequence) for this
  // forward's tokens: all of them, or a sequence-parallel rank's slice.
  // ValueError for a length < 1 or positions that are not [1, T] integers.
  ForwardContext prepare_packed(const at::Tensor& position_ids, const std::vector<int64_t>& lengths) const;
  at::Tensor embed(const at::Tensor& input_ids) const;
  // Final norm already applied -> logits or values.
  at::Tensor apply_head(const at::Tensor& hidden) const;
  // embed -> layers -> norm: [B, T, hidden] (e.g. to compute log-probs in
  // vocabulary chunks instead of materialising [B, T, vocab] logits).
  at::Tensor hidden_states(const at::Tensor& input_ids, const ForwardContext& ctx) const;
  at::Tensor hidden_states(const at::Tensor& input_ids, const at::Tensor& attention_mask = {},
                           const at::Tensor& position_ids = {}) const;

  const ModelConfig& config() const { return config_; }
  ModelHead head_kind() const { return head_kind_; }
  const at::TensorOptions& options() const { return options_; }

  at::Tensor embed_tokens;  // [vocab, hidden]
  std::vector<DecoderLayer> layers;
  RmsNorm norm;
  // lm_head (weight = embed_tokens when tied) or score.
  Linear head;
  RotaryEmbedding rotary;

 private:
  ModelConfig config_;
  ModelHead head_kind_;
  at::TensorOptions options_;
};

}  // namespace rlcore::model
