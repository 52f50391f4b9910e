// The Megatron-layout weight adaptor: rollout tensor <- its fused Megatron
// source, unfused, then re-sliced to the rollout's tensor-parallel shard.
#include "megatron_adaptor.h"

#include <ATen/ATen.h>

#include "rlcore/error.h"
#include "rlcore/model/megatron_layout.h"
#include "rlcore/model/tensor_parallel.h"
#include "weight_copy.h"

namespace rlcore::hybrid_engine {

MegatronAdaptor::MegatronAdaptor(model::ModelConfig config) : config_(std::move(config)) {}

std::vector<std::string> MegatronAdaptor::sources(const WeightMeta& target, const RolloutLayout&) const {
  return {model::megatron::megatron_source(config_, target.name)};
}

void MegatronAdaptor::convert(const WeightMeta& target, const RolloutLayout& layout,
                              const std::vector<at::Tensor>& full, at::Tensor& out) const {
  if (full.size() != 1) {
    throw ValueError("weight_adaptor megatron: rollout tensor '" + target.name + "' needs 1 source, got " +
                     std::to_string(full.size()));
  }
  const at::Tensor hf = model::megatron::to_hf(config_, target.name, full[0]);
  if (model::tp_shard_shape(target.name, hf.sizes(), layout.tp_size) != target.shape) {
    throw ValueError("weight_adaptor megatron: '" + target.name + "' from '" +
                     model::megatron::megatron_source(config_, target.name) + "' has shape " + c10::str(hf.sizes()) +
                     ", the rollout (tp rank " + std::to_string(layout.tp_rank) + " of " +
                     std::to_string(layout.tp_size) + ") expects " + c10::str(at::IntArrayRef(target.shape)));
  }
  copy_weight(model::tp_slice(target.name, hf, layout.tp_rank, layout.tp_size), out);
}

}  // namespace rlcore::hybrid_engine
