// Anchors InferenceEngine's vtable in librlcore_sdk.
#include "rlcore/inference_engine.h"

namespace rlcore {

InferenceEngine::~InferenceEngine() = default;

const char* finish_reason_name(FinishReason reason) { return reason == FinishReason::kStop ? "stop" : "length"; }

}  // namespace rlcore
