// Planning gathers straight into the bucket.
#include "direct_gather.h"

#include <algorithm>
#include <limits>
#include <string>

namespace rlcore::hybrid_engine {
namespace {

// The planned tensor that is exactly `name`'s copy, or -1.
int64_t sole_target(const SwapPlan& plan, const std::string& name) {
  auto targets = plan.targets_of.find(name);
  if (targets == plan.targets_of.end() || targets->second.size() != 1) return -1;
  const auto index = static_cast<int64_t>(targets->second.front());
  return plan.tensors[static_cast<size_t>(index)].sources.size() == 1 ? index : -1;
}

// Where gather `g`'s buffer would start, if its parameters sit in the bucket as in the buffer; else -1.
DirectGather place(const SwapPlan& plan, const GathersIntoBuffers::Gather& gather) {
  DirectGather placed;
  placed.numel = gather.numel;
  if (gather.names.empty() || gather.names.size() != gather.offsets.size() ||
      gather.names.size() != gather.numels.size()) {
    return placed;
  }
  int64_t base = -1;
  for (size_t k = 0; k < gather.names.size(); ++k) {
    const int64_t index = sole_target(plan, gather.names[k]);
    if (index < 0) return placed;
    const PlannedTensor& tensor = plan.tensors[static_cast<size_t>(index)];
    if (k == 0) placed.dtype = tensor.meta.dtype;
    const auto element = static_cast<int64_t>(c10::elementSize(placed.dtype));
    if (tensor.meta.dtype != placed.dtype || !at::isFloatingType(placed.dtype) ||
        tensor.bytes != gather.numels[k] * element) {
      return placed;
    }
    const int64_t start = tensor.byte_offset - gather.offsets[k] * element;
    if (k == 0) base = start;
    if (start != base || base < 0) return placed;
  }
  placed.byte_offset = base;
  return placed;
}

}  // namespace

int64_t DirectGatherPlan::direct_count() const {
  return std::count_if(gathers.begin(), gathers.end(), [](const DirectGather& g) { return g.direct(); });
}

DirectGatherPlan plan_direct_gathers(const SwapPlan& plan, const std::vector<GathersIntoBuffers::Gather>& gathers) {
  // The gather each planned tensor's value arrives with; a tensor no gather brings is never "later".
  constexpr size_t kNever = std::numeric_limits<size_t>::max();
  std::vector<size_t> arrives(plan.tensors.size(), kNever);
  for (size_t g = 0; g < gathers.size(); ++g) {
    for (const std::string& name : gathers[g].names) {
      auto targets = plan.targets_of.find(name);
      if (targets == plan.targets_of.end()) continue;
      for (size_t index : targets->second) {
        // A tensor built from several sources is complete with its last one.
        arrives[index] = arrives[index] == kNever ? g : std::max(arrives[index], g);
      }
    }
  }
  DirectGatherPlan result;
  for (size_t g = 0; g < gathers.size(); ++g) {
    DirectGather placed = place(plan, gathers[g]);
    if (placed.direct()) {
      const int64_t end = placed.byte_offset + placed.numel * static_cast<int64_t>(c10::elementSize(placed.dtype));
      // Every other tensor under the buffer must be written after it (its padding overwrites those
      // bytes). The tensors arriving with this gather are its own, placed above.
      if (end > plan.bucket_bytes) placed.byte_offset = -1;
      for (size_t t = 0; t < plan.tensors.size() && placed.direct(); ++t) {
        const PlannedTensor& tensor = plan.tensors[t];
        const bool overlaps = tensor.byte_offset < end && tensor.byte_offset + tensor.bytes > placed.byte_offset;
        if (overlaps && (arrives[t] == kNever || arrives[t] < g)) placed.byte_offset = -1;
      }
    }
    result.gathers.push_back(placed);
  }
  return result;
}

}  // namespace rlcore::hybrid_engine
