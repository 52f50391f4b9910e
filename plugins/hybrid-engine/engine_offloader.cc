// The `engine` offloader.
#include "engine_offloader.h"

namespace rlcore::hybrid_engine {

void EngineOffloader::offload(TrainEngine& engine, OffloadSet what) {
  if (what != OffloadSet::kNone) engine.offload(what);
}

void EngineOffloader::reload(TrainEngine& engine, OffloadSet what) {
  if (what != OffloadSet::kNone) engine.reload(what);
}

}  // namespace rlcore::hybrid_engine
