// Planning the rollout bucket.
#include "swap_plan.h"

#include <ATen/ATen.h>

namespace rlcore::hybrid_engine {

SwapPlan plan_swap(const std::vector<WeightMeta>& meta, const WeightAdaptor& adaptor, const RolloutLayout& layout) {
  SwapPlan plan;
  for (const WeightMeta& m : meta) {
    PlannedTensor planned;
    planned.meta = m;
    planned.sources = adaptor.sources(m, layout);
    const int64_t element = static_cast<int64_t>(c10::elementSize(m.dtype));
    int64_t numel = 1;
    for (int64_t d : m.shape) numel *= d;
    planned.byte_offset = (plan.bucket_bytes + element - 1) / element * element;
    planned.bytes = numel * element;
    plan.bucket_bytes = planned.byte_offset + planned.bytes;
    for (const std::string& source : planned.sources) plan.targets_of[source].push_back(plan.tensors.size());
    plan.tensors.push_back(std::move(planned));
  }
  return plan;
}

std::vector<at::Tensor> bucket_views(const SwapPlan& plan, const at::Tensor& bucket) {
  std::vector<at::Tensor> views;
  views.reserve(plan.tensors.size());
  for (const PlannedTensor& t : plan.tensors) {
    views.push_back(bucket.narrow(0, t.byte_offset, t.bytes).view(t.meta.dtype).view(t.meta.shape));
  }
  return views;
}

}  // namespace rlcore::hybrid_engine
