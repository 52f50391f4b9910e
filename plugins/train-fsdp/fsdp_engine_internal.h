// Pieces shared by the FsdpEngine source files: a micro-batch on the device,
// the RAII scope of a gathered unit, and the scope that keeps state resident.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "fsdp_engine.h"
#include "rlcore/batch.h"
#include "rlcore/model/layers.h"

namespace rlcore::fsdp {

struct FsdpEngine::MicroBatch {
  Batch rows;  // the micro-batch's rows of the caller's Batch, every column
  at::Tensor input_ids, attention_mask, position_ids, responses;  // on the engine's device
  model::ForwardContext ctx;
  int64_t prompt_len = 0;
  int64_t response_len = 0;
};

// A unit all-gathered and installed into the skeleton for the scope's
// lifetime, in the compute dtype. With `requires_grad` the installed
// parameters are views of one leaf, so leaf's gradient is the unit's flat gradient.
class GatheredUnit {
 public:
  GatheredUnit(FsdpEngine& engine, int64_t unit, bool requires_grad);
  ~GatheredUnit();
  GatheredUnit(const GatheredUnit&) = delete;
  GatheredUnit& operator=(const GatheredUnit&) = delete;

  const at::Tensor& leaf() const { return flat_; }

 private:
  FsdpEngine& engine_;
  int64_t unit_;
  at::Tensor flat_;
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
