// Fixed-size and token-budget micro-batches.
#include "micro_batches.h"

#include <algorithm>

#include <ATen/ATen.h>

#include "rlcore/error.h"

namespace rlcore::train_common {

std::vector<RowRange> micro_batch_rows(const at::Tensor& attention_mask, const MicroBatching& batching) {
  const int64_t rows = attention_mask.size(0);
  std::vector<RowRange> ranges;
  if (!batching.dynamic) {
    if (batching.micro_batch_size < 0)
      throw ValueError("micro_batch_size must be >= 0, got " + std::to_string(batching.micro_batch_size));
    const int64_t step = batching.micro_batch_size == 0 ? rows : batching.micro_batch_size;
    for (int64_t begin = 0; begin < rows; begin += step) ranges.push_back({begin, std::min(rows, begin + step)});
    return ranges;
  }
  if (batching.max_token_len <= 0)
    throw ValueError("dynamic micro-batching needs max_token_len > 0, got " + std::to_string(batching.max_token_len));
  const at::Tensor lengths = attention_mask.ne(0).sum(1).to(at::kLong).cpu().contiguous();
  const int64_t* length = lengths.data_ptr<int64_t>();
  int64_t begin = 0;
  int64_t tokens = 0;
  for (int64_t row = 0; row < rows; ++row) {
    if (row > begin && tokens + length[row] > batching.max_token_len) {
      ranges.push_back({begin, row});
      begin = row;
      tokens = 0;
    }
    tokens += length[row];
  }
  if (rows > begin) ranges.push_back({begin, rows});
  return ranges;
}

const at::Tensor& require_column(const Batch& batch, const char* name, const std::string& engine) {
  if (!batch.contains(name) || !batch.is_tensor(name))
    throw ValueError(engine + ": the batch has no tensor column '" + name + "'");
  return batch.tensor(name);
}

at::Tensor response_counts(const Batch& batch, const std::string& engine) {
  const at::Tensor mask = require_column(batch, columns::kResponseMask, engine).to(at::kDouble);
  return at::stack({mask.sum(), mask.ne(0).any(1).sum().to(at::kDouble)}).cpu();
}

namespace {

// The loss reads any column (old_log_prob, advantages, ...) next to the
// model's outputs, so every tensor column goes to the engine's device.
Batch on_device(Batch rows, const at::Device& device) {
  if (device.is_cpu()) return rows;
  for (const std::string& key : rows.tensor_keys()) rows.set(key, rows.tensor(key).to(device));
  return rows;
}

}  // namespace

std::vector<MicroBatch> make_micro_batches(const Batch& batch, const ForwardOptions& options,
                                           const model::Transformer& model, const at::Device& device,
                                           const std::string& engine) {
  const at::Tensor& ids = require_column(batch, columns::kInputIds, engine);
  const at::Tensor& mask = require_column(batch, columns::kAttentionMask, engine);
  const at::Tensor& responses = require_column(batch, columns::kResponses, engine);
  if (ids.dim() != 2 || mask.sizes() != ids.sizes() || responses.dim() != 2 || responses.size(0) != ids.size(0) ||
      responses.size(1) < 1 || responses.size(1) >= ids.size(1)) {
    throw ValueError(engine + ": expected input_ids and attention_mask [B, P + R] and responses [B, R] with P, R >= 1");
  }
  if (options.temperature <= 0) throw ValueError(engine + ": temperature must be > 0");
  const bool has_positions = batch.contains(columns::kPositionIds) && batch.is_tensor(columns::kPositionIds);
  std::vector<MicroBatch> micro;
  for (const RowRange& range : micro_batch_rows(mask, options.micro_batching)) {
    MicroBatch m;
    m.rows = on_device(batch.slice(range.begin, range.end), device);
    m.input_ids = ids.slice(0, range.begin, range.end).to(device, at::kLong);
    m.attention_mask = mask.slice(0, range.begin, range.end).to(device, at::kLong);
    if (has_positions)
      m.position_ids = batch.tensor(columns::kPositionIds).slice(0, range.begin, range.end).to(device, at::kLong);
    m.responses = responses.slice(0, range.begin, range.end).to(device, at::kLong);
    m.response_len = responses.size(1);
    m.prompt_len = ids.size(1) - m.response_len;
    m.ctx = model.prepare(m.input_ids, m.attention_mask, m.position_ids, nullptr);
    micro.push_back(std::move(m));
  }
  return micro;
}

}  // namespace rlcore::train_common
