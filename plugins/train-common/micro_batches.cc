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

// The rows' real tokens back to back: ids, positions and the indices that
// map the packed row back to the padded layout.
void pack(MicroBatch& m, const model::Transformer& model) {
  const at::Tensor real = m.attention_mask.ne(0);
  const int64_t width = real.size(1);
  Packing packing;
  const at::Tensor lengths = real.sum(1).cpu();
  const int64_t* length = lengths.data_ptr<int64_t>();
  for (int64_t r = 0; r < m.num_rows; ++r) {
    if (length[r] > 0) packing.lengths.push_back(length[r]);
  }
  if (packing.lengths.empty()) {  // nothing to pack: rows of padding only
    m.ctx = model.prepare(m.input_ids, m.attention_mask, m.position_ids, nullptr);
    return;
  }
  packing.token_index = real.reshape({-1}).nonzero().squeeze(1);
  // Each real token's packed slot: real tokens before it, in its row and the rows above.
  const at::Tensor before_row = lengths.cumsum(0).sub(lengths).to(m.attention_mask.device()).unsqueeze(1);
  const at::Tensor slot = real.to(at::kLong).cumsum(1).sub(1).add(before_row);
  const at::Tensor predictor = slot.slice(1, m.prompt_len - 1, width - 1);
  // A response token is predicted when it and the position before it are real.
  const at::Tensor predicted = real.slice(1, m.prompt_len).logical_and(real.slice(1, m.prompt_len - 1, width - 1));
  packing.response_index = predicted.reshape({-1}).nonzero().squeeze(1);
  packing.predictor_index = predictor.reshape({-1}).index_select(0, packing.response_index);
  packing.prediction_end = packing.response_index.size(0);

  const at::Tensor positions =
      m.position_ids.defined() ? m.position_ids : real.to(at::kLong).cumsum(1).sub(1);  // HF's, restarting at each row
  m.input_ids = m.input_ids.reshape({-1}).index_select(0, packing.token_index).unsqueeze(0);
  m.position_ids = positions.reshape({-1}).index_select(0, packing.token_index).unsqueeze(0);
  m.attention_mask = at::ones_like(m.input_ids);
  m.ctx = model.prepare_packed(m.position_ids, packing.lengths);
  m.packing = std::move(packing);
}

}  // namespace

at::Tensor response_hidden(const MicroBatch& micro, const at::Tensor& hidden) {
  if (const std::optional<Packing>& p = micro.packing) {
    const at::Tensor slots = p->predictor_index.slice(0, p->prediction_begin, p->prediction_end) - p->slot_begin;
    return hidden.select(0, 0).index_select(0, slots);
  }
  // Position P + t - 1 predicts response token t.
  return hidden.slice(1, micro.prompt_len - 1, micro.prompt_len - 1 + micro.response_len);
}

at::Tensor response_tokens(const MicroBatch& micro) {
  const std::optional<Packing>& p = micro.packing;
  if (!p) return micro.responses;
  return micro.responses.reshape({-1}).index_select(0,
                                                    p->response_index.slice(0, p->prediction_begin, p->prediction_end));
}

at::Tensor response_rows(const MicroBatch& micro, const at::Tensor& values) {
  if (!micro.packing) return values;
  return at::zeros({micro.num_rows * micro.response_len}, values.options())
      .index_put({micro.packing->response_index}, values)
      .view({micro.num_rows, micro.response_len});
}

std::vector<MicroBatch> make_micro_batches(const Batch& batch, const ForwardOptions& options,
                                           const model::Transformer& model, const at::Device& device,
                                           const std::string& engine, MicroBatchLayout layout) {
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
    m.num_rows = range.end - range.begin;
    m.response_len = responses.size(1);
    m.prompt_len = ids.size(1) - m.response_len;
    if (layout.packed) {
      pack(m, model);
    } else {
      m.ctx = model.prepare(m.input_ids, m.attention_mask, m.position_ids, nullptr);
    }
    micro.push_back(std::move(m));
  }
  return micro;
}

}  // namespace rlcore::train_common
