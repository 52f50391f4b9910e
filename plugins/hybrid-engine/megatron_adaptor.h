// MegatronAdaptor: the `megatron` weight adaptor, for train-megatron. The
// trainer visits full (TP-gathered) parameters in Megatron-core's layout
// (fused linear_qkv per query group, linear_fc1 = [gate; up]); each rollout
// tensor is cut out of its fused source (model::megatron::to_hf), sliced to
// the rollout rank's tensor-parallel shard and converted to the target dtype.
#pragma once

#include "rlcore/model/config.h"
#include "rlcore/weight_adaptor.h"

namespace rlcore::hybrid_engine {

class MegatronAdaptor final : public WeightAdaptor {
 public:
  explicit MegatronAdaptor(model::ModelConfig config);
  std::vector<std::string> sources(const WeightMeta& target, const RolloutLayout& layout) const override;
  void convert(const WeightMeta& target, const RolloutLayout& layout, const std::vector<at::Tensor>& full,
               at::Tensor& out) const override;

 private:
  model::ModelConfig config_;
};

}  // namespace rlcore::hybrid_engine
