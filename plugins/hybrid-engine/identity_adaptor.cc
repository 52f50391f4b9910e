// The identity-layout weight adaptor.
#include "identity_adaptor.h"

#include <ATen/ATen.h>

#include "rlcore/error.h"

namespace rlcore::hybrid {

std::vector<std::string> IdentityAdaptor::sources(const WeightMeta& target, const RolloutLayout& layout) const {
  if (layout.tp_size != 1) {
    throw ValueError("weight_adaptor identity: cannot build '" + target.name + "' for rollout tp_size " +
                     std::to_string(layout.tp_size) + "; it only maps full tensors (tp_size 1)");
  }
  return {target.name};
}

void IdentityAdaptor::convert(const WeightMeta& target, const RolloutLayout&, const std::vector<at::Tensor>& full,
                              at::Tensor& out) const {
  if (full.size() != 1 || full[0].sizes() != at::IntArrayRef(target.shape)) {
    throw ValueError("weight_adaptor identity: training tensor '" + target.name + "' has shape " +
                     (full.empty() ? std::string("<none>") : c10::str(full[0].sizes())) + ", the rollout expects " +
                     c10::str(at::IntArrayRef(target.shape)));
  }
  out.copy_(full[0]);
}

}  // namespace rlcore::hybrid
