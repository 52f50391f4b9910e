// Anchors TrainEngine's vtable in librlcore_sdk.
#include "rlcore/train_engine.h"

namespace rlcore {

TrainEngine::~TrainEngine() = default;

}  // namespace rlcore
