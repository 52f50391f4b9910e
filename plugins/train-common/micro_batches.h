// Cutting a rank's rows into micro-batches: fixed row counts, or packing
// consecutive rows up to a real-token budget (verl's use_dynamic_bsz), and
// the device tensors and forward context of each.
#pragma once

#include <cstdint>
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

// One micro-batch ready for a forward pass.
struct MicroBatch {
  Batch rows;  // the micro-batch's rows of the caller's Batch, every column, tensors on the engine's device
  at::Tensor input_ids, attention_mask, position_ids, responses;  // on the engine's device
  model::ForwardContext ctx;                                      // masks and rotary angles, from `model`'s prepare()
  int64_t prompt_len = 0;
  int64_t response_len = 0;
};

// The micro-batches of `batch` (the TrainEngine columns) on `device`.
// ValueError prefixed by `engine` for missing or inconsistent columns or a
// temperature <= 0.
std::vector<MicroBatch> make_micro_batches(const Batch& batch, const ForwardOptions& options,
                                           const model::Transformer& model, const at::Device& device,
                                           const std::string& engine);

// This rank's {response tokens, rows with a response token} as a [2] double
// CPU tensor: summed over dp it gives GlobalBatchInfo's counts.
at::Tensor response_counts(const Batch& batch, const std::string& engine);

// The tensor column `name`; ValueError prefixed by `engine` when absent.
const at::Tensor& require_column(const Batch& batch, const char* name, const std::string& engine);

}  // namespace rlcore::train_common
