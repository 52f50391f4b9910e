// Anchors InferenceEngine's vtable in librlcore_sdk.
#include "rlcore/inference_engine.h"

namespace rlcore {

InferenceEngine::~InferenceEngine() = default;

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
  }
  return "unknown";
}

}  // namespace rlcore
