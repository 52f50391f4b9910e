// Pieces shared by the MegatronEngine source files.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "megatron_engine.h"
#include "rlcore/batch.h"
#include "rlcore/model/layers.h"

namespace rlcore::train_megatron {

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

}  // namespace rlcore::train_megatron
