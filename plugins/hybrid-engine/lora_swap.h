// Swaps for a train engine that trains LoRA adapters (TrainsLowRankAdapters):
// its base weights never change, so the first swap gathers them once and keeps
//   - each rollout tensor built only from frozen weights, converted, and
//   - the full base of every source of a tensor with an adapted source;
// later swaps copy the first and rebuild the second (base + adapters, then the
// weight adaptor) with no collective: only the adapted tensors are recomputed.
// The cache lives in host memory (pinned) when the device is a GPU. It is built
// at the first swap after attach(): load a checkpoint with another base before
// that swap (the trainer resumes before it), or attach() again.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/capabilities.h"
#include "rlcore/sharding_manager.h"
#include "swap_plan.h"

namespace rlcore::hybrid_engine {

using FullParameterVisitor = std::function<void(const std::string&, const at::Tensor&)>;

class LoraSwap {
 public:
  // Null when `train` trains no adapters.
  static std::unique_ptr<LoraSwap> for_engine(TrainEngine& train, const SwapPlan& plan);

  bool cached() const { return cached_; }
  // Runs the engine's base walk (collective), handing `visit` the weights
  // for_each_full_parameter would give and keeping the bases the cache needs.
  void visit_and_keep_bases(const FullParameterVisitor& visit);
  // After the first swap filled `outputs`: keeps the frozen tensors.
  void keep_frozen(const std::vector<at::Tensor>& outputs);
  // Every later swap: fills `outputs` from the cache (no collective).
  void fill_from_cache(const WeightAdaptor& adaptor, const RolloutLayout& layout, std::vector<at::Tensor>& outputs);
  // Bytes the cache holds (host memory on a GPU, device memory on the CPU).
  int64_t bytes() const { return bytes_; }

 private:
  LoraSwap(TrainsLowRankAdapters& adapters, const SwapPlan& plan);
  at::Tensor keep(const at::Tensor& tensor);

  TrainsLowRankAdapters& adapters_;
  const SwapPlan& plan_;
  std::set<std::string> adapted_;            // training names that carry an adapter
  std::vector<bool> rebuilt_;                // per planned tensor: a source is adapted
  std::map<std::string, at::Tensor> bases_;  // sources of rebuilt tensors, full base values
  std::vector<at::Tensor> frozen_;           // per planned tensor that is not rebuilt
  int64_t bytes_ = 0;
  bool cached_ = false;
};

}  // namespace rlcore::hybrid_engine
