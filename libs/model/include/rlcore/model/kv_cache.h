// KvCache: preallocated per-layer keys/values for batched incremental decoding
// with HF-style left-padded prompts.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/model/config.h"

namespace rlcore::model {

// Slot-aligned layout: every forward writes all rows' new tokens to the same
// slots [used, used + T), so a left-padded batch needs no per-row scatter and
// decode steps are plain slice copies. `valid` marks which slots hold real
// tokens (false for padding), `lengths` counts them per row (= the next
// position id). Rows may therefore have different lengths; padding costs slots.
// Copies share the tensors.
class KvCache {
 public:
  KvCache() = default;
  KvCache(const ModelConfig& config, int64_t batch_size, int64_t max_len, const at::TensorOptions& options);

  // Latent attention (deepseek_v3): its decompressed keys and values per head,
  // qk_head_dim() and v_head_dim wide.
  std::vector<at::Tensor> keys;    // per layer [B, kv_heads, max_len, head_dim]
  std::vector<at::Tensor> values;  // per layer [B, kv_heads, max_len, head_dim]
  at::Tensor valid;                // [B, max_len] bool
  at::Tensor lengths;              // [B] int64
  int64_t used = 0;                // slots written, the same for every row

  int64_t batch_size() const { return valid.defined() ? valid.size(0) : 0; }
  int64_t max_len() const { return valid.defined() ? valid.size(1) : 0; }

  // Keeps the rows `rows` (int64 indices, in that order) so finished sequences
  // leave the batch; the leading slots no kept row uses are dropped as well.
  // Copies the cache once; the kept rows' future outputs are unchanged.
  void keep_rows(const at::Tensor& rows);
  // Forgets every token, keeping the allocation.
  void reset();
};

}  // namespace rlcore::model
