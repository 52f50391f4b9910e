// The identity-layout weight adaptor: one HF tensor per target, re-sliced to
// the rollout's tensor-parallel shard (tp_size 1: the whole tensor).
#include "identity_adaptor.h"

#include <ATen/ATen.h>

#include "rlcore/error.h"
#include "rlcore/model/tensor_parallel.h"
#include "weight_copy.h"

namespace rlcore::hybrid_engine {

std::vector<std::string> IdentityAdaptor::sources(const WeightMeta& target, const RolloutLayout&) const {
  return {target.name};
}

void IdentityAdaptor::convert(const WeightMeta& target, const RolloutLayout& layout,
                              const std::vector<at::Tensor>& full, at::Tensor& out) const {
  if (full.size() != 1 || model::tp_shard_shape(target.name, full[0].sizes(), layout.tp_size) != target.shape) {
    throw ValueError("weight_adaptor identity: training tensor '" + target.name + "' has shape " +
                     (full.empty() ? std::string("<none>") : c10::str(full[0].sizes())) + ", the rollout (tp rank " +
                     std::to_string(layout.tp_rank) + " of " + std::to_string(layout.tp_size) + ") expects " +
                     c10::str(at::IntArrayRef(target.shape)));
  }
  copy_weight(model::tp_slice(target.name, full[0], layout.tp_rank, layout.tp_size), out);
}

}  // namespace rlcore::hybrid_engine
