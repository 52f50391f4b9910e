#include "rlcore/core/serve/generation_gate.h"

#include "rlcore/core/serve/api_error.h"

namespace rlcore::serve {

void GenerationGate::enter() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, kMaxHold, [&] { return !paused_ || !hold_new_; });
  if (paused_) throw ApiError(503, "ServiceUnavailableError", "Generation is paused; retry after the server resumes.");
  ++in_flight_;
}

void GenerationGate::leave() {
  std::lock_guard<std::mutex> lock(mutex_);
  --in_flight_;
  changed_.notify_all();
}

void GenerationGate::pause(const std::string& mode, const InFlight& in_flight) {
  if (mode != "abort" && mode != "wait" && mode != "keep") {
    throw bad_request("mode must be one of abort, wait, keep, got '" + mode.substr(0, 40) + "'", "mode");
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    paused_ = true;
    hold_new_ = mode == "keep";
  }
  if (mode == "abort" && in_flight.abort) in_flight.abort();
  if (mode == "keep" && in_flight.freeze && in_flight.freeze()) return;
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return in_flight_ == 0; });
}

void GenerationGate::resume() {
  std::lock_guard<std::mutex> lock(mutex_);
  paused_ = false;
  hold_new_ = false;
  changed_.notify_all();
}

bool GenerationGate::paused() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return paused_;
}

}  // namespace rlcore::serve
