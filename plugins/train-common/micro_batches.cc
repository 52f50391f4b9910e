// Fixed-size and token-budget micro-batches.
#include "micro_batches.h"

#include <algorithm>

#include <ATen/ATen.h>

#include "rlcore/error.h"

namespace rlcore::train {

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

}  // namespace rlcore::train
