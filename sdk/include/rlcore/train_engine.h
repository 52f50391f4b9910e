// TrainEngine: the `train_engine` plugin kind (fsdp, megatron, ...). Holds a
// model's trainable state on the ranks of a worker group, computes per-token
// log-probs / entropy (LM head) or values (value head) of response tokens, and
// takes optimizer steps with a loss the caller supplies. Engines read their
// process groups from ComponentContext::comm ("dp", and "tp"/"pp" for model
// parallel engines); every method marked collective must be called by all
// ranks of the engine's groups in the same order.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/batch.h"
#include "rlcore/columns.h"
#include "rlcore/export.h"

namespace rlcore {

// The Batch columns engines read (verl's DataProto layout). With P prompt and
// R response columns (L = P + R):
//   input_ids      [B, L] int64: the prompt left-padded, then the response right-padded
//   attention_mask [B, L] int64: 1 = token, 0 = padding
//   position_ids   [B, L] int64: optional; cumsum(attention_mask) - 1 by default
//   responses      [B, R] int64: input_ids[:, P:]
//   response_mask  [B, R]: nonzero = a response token counted by losses
// The output for response token t is computed from the logits at position
// P + t - 1 (the position that predicts it). Their names: rlcore/columns.h.

// How a rank's rows are cut into micro-batches (verl's *_micro_batch_size_per_gpu,
// use_dynamic_bsz and *_max_token_len_per_gpu).
struct MicroBatching {
  int64_t micro_batch_size = 0;  // rows per micro-batch; 0: all rows at once
  bool dynamic = false;          // pack rows up to max_token_len real tokens instead
  int64_t max_token_len = 0;     // dynamic only; a row longer than this gets a micro-batch alone
};

struct ForwardOptions {
  double temperature = 1.0;  // logits are divided by it first (the rollout's temperature)
  bool entropy = false;      // also compute per-token entropy
  MicroBatching micro_batching;
};

// Per response token, [b, R] each; float32. LM head: log_prob (and entropy when
// asked); value head: values.
struct ModelOutput {
  at::Tensor log_prob;
  at::Tensor entropy;
  at::Tensor values;
};

// Counts over the whole mini-batch on every dp rank, so a loss can be
// normalised the same way whatever the layout (see LossAggregation).
struct GlobalBatchInfo {
  int64_t dp_size = 1;
  double num_tokens = 0;     // sum of response_mask
  double num_sequences = 0;  // rows with at least one response token
};

struct LossOutput {
  at::Tensor loss;                            // scalar, with gradient; gradients of micro-batches are summed
  std::map<std::string, at::Tensor> metrics;  // detached scalars, averaged over micro-batches
};

// The loss of one micro-batch (its rows of the step's Batch, every column kept,
// tensors on the engine's device) from the model's outputs on it (with gradient).
using LossFunction =
    std::function<LossOutput(const Batch& micro_batch, const ModelOutput& output, const GlobalBatchInfo& global)>;

struct TrainStepOutput {
  // The loss function's metrics (mean over micro-batches, then over dp ranks),
  // plus "grad_norm" (global, before clipping) and "lr".
  std::map<std::string, double> metrics;
};

// A parameter's piece held by this rank: elements [offset, offset + local.numel())
// of the full tensor flattened in row-major order.
struct ParameterShard {
  std::string name;            // HF name
  std::vector<int64_t> shape;  // of the full tensor
  at::Tensor local;            // 1-D
  int64_t offset = 0;
};

// What can move to host memory and back.
enum class OffloadSet : unsigned {
  kNone = 0,
  kParams = 1u << 0,
  kGrads = 1u << 1,
  kOptimizer = 1u << 2,
  kAll = 7,
};
inline OffloadSet operator|(OffloadSet a, OffloadSet b) {
  return static_cast<OffloadSet>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
inline bool contains(OffloadSet set, OffloadSet member) {
  return (static_cast<unsigned>(set) & static_cast<unsigned>(member)) != 0;
}

// Bytes of training state this rank holds, by kind and place.
struct TrainMemory {
  int64_t param_bytes = 0;  // parameters (incl. fp32 master copies) on the device
  int64_t grad_bytes = 0;
  int64_t optimizer_bytes = 0;  // optimizer state
  int64_t host_bytes = 0;       // offloaded state in host memory
};

class RLCORE_API TrainEngine {
 public:
  static constexpr const char* kKind = "train_engine";

  virtual ~TrainEngine();

  // Outputs for this rank's rows, no gradient. Collective.
  virtual ModelOutput forward(const Batch& batch, const ForwardOptions& options) = 0;

  // One optimizer step over this rank's rows of a mini-batch: micro-batches,
  // forward with gradient, `loss`, backward, accumulate; then gradients are
  // reduced over dp, clipped by global norm, and the optimizer and the
  // learning-rate schedule step. Collective. Throws on a frozen engine.
  virtual TrainStepOutput train_step(const Batch& batch, const ForwardOptions& options, const LossFunction& loss) = 0;

  // This rank's parameter pieces, in the model's parameter order; no communication.
  virtual std::vector<ParameterShard> parameter_shards() const = 0;
  // Visits every full parameter by HF name, in order, one at a time (gathered
  // per unit and freed after the visit, so the whole model is never resident).
  // Collective; every rank visits every parameter.
  virtual void for_each_full_parameter(const std::function<void(const std::string&, const at::Tensor&)>& visit) = 0;

  // Sharded checkpoint of the model, optimizer, schedule and RNG in `dir`
  // (created). Collective. load_checkpoint accepts one saved with any number
  // of ranks; throws naming the file for a missing or corrupt one.
  virtual void save_checkpoint(const std::string& dir) = 0;
  virtual void load_checkpoint(const std::string& dir) = 0;
  // A Hugging Face checkpoint directory (config.json, model.safetensors,
  // tokenizer files), written by dp rank 0. Collective.
  virtual void export_hf(const std::string& dir) = 0;

  virtual void offload(OffloadSet what) = 0;
  virtual void reload(OffloadSet what) = 0;
  virtual TrainMemory memory() const = 0;

  // Optimizer steps taken (restored by load_checkpoint).
  virtual int64_t step() const = 0;
};

}  // namespace rlcore
