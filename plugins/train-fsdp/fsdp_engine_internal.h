// Pieces shared by the FsdpEngine source files: the RAII scope of a gathered
// unit, and the scope that keeps state resident.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "fsdp_engine.h"
#include "rlcore/batch.h"
#include "rlcore/model/layers.h"

namespace rlcore::fsdp {

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
  // Adds grads[first + i] (the gradient of leaves()[i]; undefined = none) into
  // the unit's flat fp32 gradient.
  void add_grads(at::Tensor& flat_grad, const std::vector<at::Tensor>& grads, size_t first) const;

 private:
  FsdpEngine& engine_;
  int64_t unit_;
  std::vector<at::Tensor> leaves_;
};

// Brings the offloaded parts of `needed` back for the scope and returns them
// to host memory at its end, so offload state survives every call.
class ResidentScope {
 public:
  ResidentScope(FsdpEngine& engine, OffloadSet needed);
  ~ResidentScope();
  ResidentScope(const ResidentScope&) = delete;
  ResidentScope& operator=(const ResidentScope&) = delete;

 private:
  FsdpEngine& engine_;
  OffloadSet moved_;
};

}  // namespace rlcore::fsdp
