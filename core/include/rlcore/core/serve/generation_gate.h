// Whether `rlcore serve` takes new generations: vLLM's /pause and /resume.
// Paused with mode "keep", new requests wait for /resume (at most
// kMaxHold, then 503, so a client that never resumes cannot pin them); with "wait" or
// "abort" they are refused with 503 (vLLM's answer). Pausing returns once the
// generations in flight are done; with "abort" it first calls `in_flight.abort`,
// which ends them early where the engine runs requests; with "keep" it calls
// `in_flight.freeze`, which stops them where they are where the engine runs
// requests (true: pausing returns at once, they go on after /resume).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "rlcore/export.h"

namespace rlcore::serve {

class RLCORE_API GenerationGate {
 public:
  static constexpr std::chrono::seconds kMaxHold{600};

  // Blocks while paused in "keep" mode; throws ApiError 503 when paused otherwise.
  void enter();
  void leave();

  struct InFlight {
    std::function<void()> abort;
    std::function<bool()> freeze;  // false where it cannot
  };
  // mode: abort | wait | keep; anything else is a 400 naming it.
  void pause(const std::string& mode, const InFlight& in_flight = {});
  void resume();
  bool paused() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool paused_ = false;
  bool hold_new_ = false;  // "keep": new requests wait instead of being refused
  int64_t in_flight_ = 0;
};

// enter() on construction, leave() on destruction.
class GateTicket {
 public:
  explicit GateTicket(GenerationGate& gate) : gate_(gate) { gate_.enter(); }
  ~GateTicket() { gate_.leave(); }
  GateTicket(const GateTicket&) = delete;
  GateTicket& operator=(const GateTicket&) = delete;

 private:
  GenerationGate& gate_;
};

}  // namespace rlcore::serve
