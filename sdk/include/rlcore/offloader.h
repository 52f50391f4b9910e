// Offloader: the `offloader` plugin kind. Moves a TrainEngine's parameters,
// gradients and optimizer state to host memory while the rollout runs, and
// back before training; each part is switchable.
#pragma once

#include "rlcore/export.h"
#include "rlcore/train_engine.h"

namespace rlcore {

class RLCORE_API Offloader {
 public:
  static constexpr const char* kKind = "offloader";

  virtual ~Offloader();

  // Moves `what` of `engine` to host memory (pinned memory on CUDA builds, so
  // the copies back can be asynchronous); a part already offloaded stays put.
  virtual void offload(TrainEngine& engine, OffloadSet what) = 0;
  // Brings `what` back to the engine's device, bit-identical.
  virtual void reload(TrainEngine& engine, OffloadSet what) = 0;
};

}  // namespace rlcore
