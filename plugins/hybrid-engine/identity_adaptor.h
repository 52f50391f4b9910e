// IdentityAdaptor: the `identity` weight adaptor, for trainers whose full
// parameters already have the inference engine's HF names and shapes (fsdp ->
// native): each target is its same-named source, sliced to the rollout's
// tensor-parallel shard (model::tp_slice by layout.tp_rank) and converted to
// the target dtype. One code path for every tp_size.
#pragma once

#include "rlcore/weight_adaptor.h"

namespace rlcore::hybrid_engine {

class IdentityAdaptor final : public WeightAdaptor {
 public:
  std::vector<std::string> sources(const WeightMeta& target, const RolloutLayout& layout) const override;
  void convert(const WeightMeta& target, const RolloutLayout& layout, const std::vector<at::Tensor>& full,
               at::Tensor& out) const override;
};

}  // namespace rlcore::hybrid_engine
