// Joining slot-aligned KV caches: one copy of each into the new layout.
#include "kv_join.h"

#include <algorithm>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "rlcore/error.h"

namespace rlcore::infer_native {
namespace {

// `part`'s slots [0, part_used) go to rows [row, row + rows) and slots
// [used - part_used, used) of `out`; slot_dim is 2 for keys/values, 1 for valid.
void place(at::Tensor& out, const at::Tensor& part, int64_t row, int64_t part_used, int64_t used, int64_t slot_dim) {
  const int64_t rows = part.size(0);
  if (rows == 0 || part_used == 0) return;
  out.slice(0, row, row + rows).slice(slot_dim, used - part_used, used).copy_(part.slice(slot_dim, 0, part_used));
}

at::Tensor joined(const at::Tensor& a, int64_t a_used, const at::Tensor& b, int64_t b_used, int64_t used,
                  int64_t max_len, int64_t slot_dim) {
  const at::Tensor& like = a.defined() ? a : b;
  std::vector<int64_t> shape = like.sizes().vec();
  shape[0] = (a.defined() ? a.size(0) : 0) + (b.defined() ? b.size(0) : 0);
  shape[slot_dim] = max_len;
  // Zeros: a masked slot must hold finite values (0 * NaN would poison attention).
  at::Tensor out = at::zeros(shape, like.options());
  if (a.defined()) place(out, a, 0, a_used, used, slot_dim);
  if (b.defined()) place(out, b, a.defined() ? a.size(0) : 0, b_used, used, slot_dim);
  return out;
}

}  // namespace

model::KvCache join_rows(const model::KvCache& running, const model::KvCache& joining, int64_t max_len) {
  const bool has_running = running.batch_size() > 0;
  const bool has_joining = joining.batch_size() > 0;
  if (!has_running && !has_joining) throw ValueError("join_rows: both caches are empty");
  const int64_t used = std::max(has_running ? running.used : 0, has_joining ? joining.used : 0);
  if (max_len < used) {
    throw ValueError("join_rows: max_len " + std::to_string(max_len) + " is below the " + std::to_string(used) +
                     " slots the joined rows use");
  }
  const model::KvCache& any = has_running ? running : joining;
  auto pick = [](bool has, const at::Tensor& t) { return has ? t : at::Tensor(); };
  model::KvCache out;
  for (size_t layer = 0; layer < any.keys.size(); ++layer) {
    out.keys.push_back(joined(pick(has_running, running.keys[layer]), running.used,
                              pick(has_joining, joining.keys[layer]), joining.used, used, max_len, 2));
    out.values.push_back(joined(pick(has_running, running.values[layer]), running.used,
                                pick(has_joining, joining.values[layer]), joining.used, used, max_len, 2));
  }
  out.valid = joined(pick(has_running, running.valid), running.used, pick(has_joining, joining.valid), joining.used,
                     used, max_len, 1);
  if (has_running && has_joining) {
    out.lengths = at::cat({running.lengths, joining.lengths});
  } else {
    out.lengths = (has_running ? running.lengths : joining.lengths).clone();
  }
  out.used = used;
  return out;
}

}  // namespace rlcore::infer_native
