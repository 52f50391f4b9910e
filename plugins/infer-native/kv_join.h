// Joining two slot-aligned KV caches (rlcore/model/kv_cache.h) into one batch:
// how requests enter a running decode batch.
#pragma once

#include <cstdint>

#include "rlcore/model/kv_cache.h"

namespace rlcore::infer_native {

// The rows of `running`, then those of `joining`, in a new cache of `max_len`
// slots. Both are right-aligned at slot max(running.used, joining.used) so
// that every row's next token goes to the same slot; positions come from
// `lengths`, so a row's outputs do not change with its slots. Either may be
// empty (no rows). max_len must hold the aligned slots.
model::KvCache join_rows(const model::KvCache& running, const model::KvCache& joining, int64_t max_len);

}  // namespace rlcore::infer_native
