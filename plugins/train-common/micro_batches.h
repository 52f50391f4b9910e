// Cutting a rank's rows into micro-batches: fixed row counts, or packing
// consecutive rows up to a real-token budget (verl's use_dynamic_bsz).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/train_engine.h"

namespace rlcore::train {

struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;  // exclusive
};

// Consecutive row ranges covering [0, rows) of `attention_mask` [rows, L];
// order is kept so outputs concatenate back in row order. Throws ValueError
// for a negative size or a dynamic budget <= 0.
std::vector<RowRange> micro_batch_rows(const at::Tensor& attention_mask, const MicroBatching& batching);

}  // namespace rlcore::train
