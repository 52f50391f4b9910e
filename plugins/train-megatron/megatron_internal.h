// Pieces shared by the MegatronEngine source files.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "megatron_engine.h"
#include "rlcore/batch.h"
#include "rlcore/model/layers.h"

namespace rlcore::megatron {

struct MegatronEngine::MicroBatch {
  Batch rows;  // the micro-batch's rows of the caller's Batch, every column
  at::Tensor input_ids, attention_mask, position_ids, responses;  // on the engine's device
  model::ForwardContext ctx;
  int64_t prompt_len = 0;
  int64_t response_len = 0;
};

// Brings the offloaded parts of `needed` back for the scope and parks them again at its end.
class MegatronEngine::Resident {
 public:
  Resident(MegatronEngine& engine, OffloadSet needed);
  ~Resident();
  Resident(const Resident&) = delete;
  Resident& operator=(const Resident&) = delete;

 private:
  MegatronEngine& engine_;
  OffloadSet moved_;
};

}  // namespace rlcore::megatron
