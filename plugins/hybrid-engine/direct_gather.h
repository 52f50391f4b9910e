// Which of the train engine's gathers (GathersIntoBuffers) can land straight
// in the rollout's bucket: those whose parameters are, in the bucket, exactly
// their own flat buffer (same order, offsets, element counts and one dtype),
// as they are for the identity adaptor when the rollout orders its weights as
// the trainer does. A buffer's padding may spill past its last parameter only
// onto alignment gaps or tensors written after it, never past the bucket's
// end (the bucket stays exactly the rollout's weights). The swap then holds
// no gathered copy of its own.
#pragma once

#include <cstdint>
#include <vector>

#include <c10/core/ScalarType.h>

#include "rlcore/capabilities.h"
#include "swap_plan.h"

namespace rlcore::hybrid_engine {

struct DirectGather {
  int64_t byte_offset = -1;  // where the gather's buffer starts in the bucket; -1: not direct
  int64_t numel = 0;         // elements of the buffer
  at::ScalarType dtype = at::kFloat;
  bool direct() const { return byte_offset >= 0; }
};

struct DirectGatherPlan {
  std::vector<DirectGather> gathers;  // one per engine gather, in its order
  int64_t direct_count() const;
};

// Pure bookkeeping over the plan (the caller has checked that every planned
// tensor is a plain copy of its one source: the identity adaptor, tp = pp = 1).
DirectGatherPlan plan_direct_gathers(const SwapPlan& plan, const std::vector<GathersIntoBuffers::Gather>& gathers);

}  // namespace rlcore::hybrid_engine
