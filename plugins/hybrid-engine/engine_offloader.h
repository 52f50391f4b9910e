// EngineOffloader: the `engine` offloader. Delegates to the TrainEngine's own
// offload()/reload(), which knows where its state lives (train-fsdp moves each
// shard's tensors to host, pinned on CUDA builds).
#pragma once

#include "rlcore/offloader.h"

namespace rlcore::hybrid_engine {

class EngineOffloader final : public Offloader {
 public:
  void offload(TrainEngine& engine, OffloadSet what) override;
  void reload(TrainEngine& engine, OffloadSet what) override;
};

}  // namespace rlcore::hybrid_engine
