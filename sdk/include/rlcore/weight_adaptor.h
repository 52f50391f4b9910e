// WeightAdaptor: the `weight_adaptor` plugin kind. Converts full training
// parameters (HF names, the trainer's layout) into the tensors an inference
// engine holds (its weight_meta()), for the hybrid engine's weight swap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/export.h"
#include "rlcore/inference_engine.h"

namespace rlcore {

// Where this rank sits in the rollout's layout. Today's engines are tp = pp = 1
// (every rollout rank holds the whole model); adaptors that re-slice for TP read
// tp_rank / tp_size here.
struct RolloutLayout {
  int64_t tp_size = 1;
  int64_t tp_rank = 0;
  int64_t pp_size = 1;
  int64_t pp_rank = 0;
};

class RLCORE_API WeightAdaptor {
 public:
  static constexpr const char* kKind = "weight_adaptor";

  virtual ~WeightAdaptor();

  // The full training parameters (by name) that `target` is built from, e.g.
  // {q, k, v} for a fused QKV target. Throws ValueError naming `target` when
  // the adaptor cannot build it.
  virtual std::vector<std::string> sources(const WeightMeta& target, const RolloutLayout& layout) const = 0;

  // Writes `target` into `out` (preallocated: target's shape and dtype, a view
  // into a bucket) from the full tensors named by sources(), in that order.
  // Converts dtype; must not keep references to `full` or `out`.
  virtual void convert(const WeightMeta& target, const RolloutLayout& layout, const std::vector<at::Tensor>& full,
                       at::Tensor& out) const = 0;
};

}  // namespace rlcore
