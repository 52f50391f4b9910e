// KvCache allocation and batch shrinking for the slot-aligned layout.
#include "rlcore/model/kv_cache.h"

#include <ATen/ATen.h>

#include "rlcore/error.h"

namespace rlcore::model {

KvCache::KvCache(const ModelConfig& config, int64_t batch_size, int64_t max_len, const at::TensorOptions& options) {
  if (batch_size < 0 || max_len <= 0) {
    throw ValueError("KvCache: batch_size must be >= 0 and max_len > 0, got " + std::to_string(batch_size) + " and " +
                     std::to_string(max_len));
  }
  // Zeros, not empty: a masked slot gets probability 0, and 0 * NaN garbage would be NaN.
  // Latent attention's keys and values differ in width (its decompressed heads are cached).
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    keys.push_back(at::zeros({batch_size, config.num_key_value_heads, max_len, config.qk_head_dim()}, options));
    values.push_back(at::zeros({batch_size, config.num_key_value_heads, max_len, config.value_head_dim()}, options));
  }
  const at::TensorOptions on_device = at::TensorOptions().device(options.device());
  valid = at::zeros({batch_size, max_len}, on_device.dtype(at::kBool));
  lengths = at::zeros({batch_size}, on_device.dtype(at::kLong));
}

void KvCache::keep_rows(const at::Tensor& rows) {
  const at::Tensor index = rows.to(valid.device(), at::kLong);
  if (index.dim() != 1)
    throw ValueError("KvCache::keep_rows: rows must be 1-D, got " + std::to_string(index.dim()) + "-D");
  const at::Tensor kept_valid = valid.slice(1, 0, used).index_select(0, index);
  // Slots before the first one any kept row uses hold only padding now.
  const at::Tensor used_slots = kept_valid.any(0).nonzero();
  const int64_t first = used_slots.numel() > 0 ? used_slots[0].item<int64_t>() : used;
  const int64_t kept = used - first;
  auto shrink = [&](const at::Tensor& full) {
    const int64_t slot_dim = full.dim() == 4 ? 2 : 1;  // keys/values [B, KV, L, D], valid [B, L]
    std::vector<int64_t> shape = full.sizes().vec();
    shape[0] = index.size(0);
    at::Tensor out = at::zeros(shape, full.options());
    out.slice(slot_dim, 0, kept).copy_(full.slice(slot_dim, first, used).index_select(0, index));
    return out;
  };
  for (auto& k : keys) k = shrink(k);
  for (auto& v : values) v = shrink(v);
  valid = shrink(valid);
  lengths = lengths.index_select(0, index);
  used = kept;
}

void KvCache::reset() {
  valid.zero_();
  lengths.zero_();
  used = 0;
}

}  // namespace rlcore::model
