// SwapPlan: where every inference tensor goes in the rollout's bucket (one per
// PP stage; today's engines have one stage) and which full training tensors
// it is built from. Pure bookkeeping: planning allocates no tensor memory.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/weight_adaptor.h"

namespace rlcore::hybrid_engine {

struct PlannedTensor {
  WeightMeta meta;
  std::vector<std::string> sources;  // full training tensors, by name
  int64_t byte_offset = 0;           // in the bucket
  int64_t bytes = 0;
};

struct SwapPlan {
  std::vector<PlannedTensor> tensors;                     // weight_meta() order
  int64_t bucket_bytes = 0;                               // exactly the sum of the tensors' bytes
  std::map<std::string, std::vector<size_t>> targets_of;  // training name -> tensors it feeds
};

// Tensors are packed in order with no padding (the meta order keeps equal
// dtypes together; a tensor is aligned to its element size only when dtypes mix).
SwapPlan plan_swap(const std::vector<WeightMeta>& meta, const WeightAdaptor& adaptor, const RolloutLayout& layout);

// Views of `bucket` (1-D uint8, plan.bucket_bytes) shaped and typed as the planned tensors.
std::vector<at::Tensor> bucket_views(const SwapPlan& plan, const at::Tensor& bucket);

}  // namespace rlcore::hybrid_engine
