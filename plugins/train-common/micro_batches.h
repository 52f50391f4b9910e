// Cutting a rank's rows into micro-batches: fixed row counts, or packing
// consecutive rows up to a real-token budget (verl's use_dynamic_bsz), and
// the device tensors and forward context of each.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/batch.h"
#include "rlcore/model/layers.h"
#include "rlcore/model/transformer.h"
#include "rlcore/train_engine.h"

namespace rlcore::train_common {

struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;  // exclusive
};

// Consecutive row ranges covering [0, rows) of `attention_mask` [rows, L];
// order is kept so outputs concatenate back in row order. Throws ValueError
// for a negative size or a dynamic budget <= 0.
std::vector<RowRange> micro_batch_rows(const at::Tensor& attention_mask, const MicroBatching& batching);

// A micro-batch's rows packed into one row without padding
// (use_remove_padding): each row's real tokens, row after row.
struct Packing {
  at::Tensor token_index;        // [N] int64: each packed token's flat index into [rows * (P + R)]
  at::Tensor predictor_index;    // [n] int64, increasing: the packed slot predicting each real response token
  at::Tensor response_index;     // [n] int64: that response token's flat index into [rows * R]
  std::vector<int64_t> lengths;  // real tokens of each row that has any, in row order
  // Sequence parallelism: this rank's forward holds packed slots
  // [slot_begin, slot_begin + its tokens) and predicts the response tokens
  // [prediction_begin, prediction_end) of the n; every rank's count of them.
  int64_t slot_begin = 0;
  int64_t prediction_begin = 0;
  int64_t prediction_end = 0;
  std::vector<int64_t> rank_predictions;  // empty without sequence parallelism
};

// One micro-batch ready for a forward pass.
struct MicroBatch {
  Batch rows;  // the micro-batch's rows of the caller's Batch, every column, tensors on the engine's device
  // On the engine's device; packed: input_ids, attention_mask (all ones) and
  // position_ids are [1, N], responses stays [rows, R].
  at::Tensor input_ids, attention_mask, position_ids, responses;
  model::ForwardContext ctx;  // masks and rotary angles, from `model`'s prepare() or prepare_packed()
  int64_t num_rows = 0;
  int64_t prompt_len = 0;
  int64_t response_len = 0;
  std::optional<Packing> packing;
};

// How micro-batches are laid out besides their rows.
struct MicroBatchLayout {
  bool packed = false;  // use_remove_padding
};

// The engines' use_remove_padding key, documented once.
inline constexpr const char* kUseRemovePaddingDoc =
    "Pack each micro-batch's rows into one sequence without padding (attention kept within each row) instead of "
    "padding them to the longest: the same numbers, no compute spent on padding (docs/trainer.md#packing). verl's "
    "actor_rollout_ref.model.use_remove_padding / critic.model.use_remove_padding set it.";

// The micro-batches of `batch` (the TrainEngine columns) on `device`.
// ValueError prefixed by `engine` for missing or inconsistent columns or a
// temperature <= 0.
std::vector<MicroBatch> make_micro_batches(const Batch& batch, const ForwardOptions& options,
                                           const model::Transformer& model, const at::Device& device,
                                           const std::string& engine, MicroBatchLayout layout = {});

// The hidden states that predict the response tokens: [rows, R, H] of a
// padded micro-batch's [rows, P + R, H], [n, H] of a packed one's [1, N, H]
// (a sequence-parallel rank's: its predictions only).
at::Tensor response_hidden(const MicroBatch& micro, const at::Tensor& hidden);
// The response tokens they predict: [rows, R], or packed [n] (a
// sequence-parallel rank's: its predictions only).
at::Tensor response_tokens(const MicroBatch& micro);
// Per-response-token values as response_hidden() lays them out -> [rows, R]
// (packed: 0 where the response is padding).
at::Tensor response_rows(const MicroBatch& micro, const at::Tensor& values);

// This rank's {response tokens, rows with a response token} as a [2] double
// CPU tensor: summed over dp it gives GlobalBatchInfo's counts.
at::Tensor response_counts(const Batch& batch, const std::string& engine);

// The tensor column `name`; ValueError prefixed by `engine` when absent.
const at::Tensor& require_column(const Batch& batch, const char* name, const std::string& engine);

}  // namespace rlcore::train_common
