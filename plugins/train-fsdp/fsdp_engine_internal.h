// Pieces shared by the FsdpEngine source files: the RAII scope of a gathered
// unit, and the gradient buffers of a train_step.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "fsdp_engine.h"
#include "rlcore/batch.h"
#include "rlcore/model/layers.h"

namespace rlcore::train_fsdp {

// A unit's gradient while a train_step accumulates it: this rank's grad shard
// itself when nothing needs reducing (one rank, fp32 reduce_dtype), else a
// workspace buffer that reduce_gradient averages over dp. The first write of a
// step copies into each parameter's range (no zero-fill pass), later ones add.
struct UnitGrad {
  at::Tensor flat;
  bool direct = false;   // `flat` is the grad shard
  bool written = false;  // every range holds a sum (or its first term)
};

// A unit all-gathered and installed into the skeleton for the scope's
// lifetime, in the compute dtype. With `requires_grad` every installed
// parameter is its own leaf (a view of the gathered buffer): gradients of
// separate leaves cost one copy each into the flat gradient, where views of
// one flat leaf would each back-propagate a zero-filled unit-sized tensor.
class GatheredUnit {
 public:
  GatheredUnit(FsdpEngine& engine, int64_t unit, bool requires_grad);
  ~GatheredUnit();
  GatheredUnit(const GatheredUnit&) = delete;
  GatheredUnit& operator=(const GatheredUnit&) = delete;

  // The installed parameters, in the unit's order.
  const std::vector<at::Tensor>& leaves() const { return leaves_; }
  // Accumulates grads[first + i] (the gradient of leaves()[i], in the compute
  // dtype; undefined = none) into the unit's flat fp32 gradient.
  void add_grads(UnitGrad& grad, const std::vector<at::Tensor>& grads, size_t first) const;

 private:
  FsdpEngine& engine_;
  int64_t unit_;
  std::vector<at::Tensor> leaves_;
};

// Flat fp32 unit gradients for one train_step, reused from unit to unit: a
// fresh unit-sized buffer per unit is page-faulted in on every use. Two slots,
// as the head and the tied embeddings are reduced together.
class GradWorkspace {
 public:
  GradWorkspace(int64_t max_numel, const at::Device& device) : max_numel_(max_numel), device_(device) {}
  // `numel` uninitialised elements in `slot` (0 or 1), valid until the slot is asked for again.
  at::Tensor take(int64_t numel, int slot);

 private:
  int64_t max_numel_;
  at::Device device_;
  at::Tensor slots_[2];
};

}  // namespace rlcore::train_fsdp
