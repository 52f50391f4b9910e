// Who uses the engine: generations share it; a weight reload or a sleep has
// it to itself, waiting for the shared uses to end and holding new ones back.
// Unlike std::shared_mutex, a shared use may end on another thread than the
// one it began on: an event-driven answer ends on the request driver's
// stepping thread or on an I/O thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace rlcore::serve {

class EngineUse {
 public:
  void share() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return !owned_ && waiting_owners_ == 0; });
    ++sharing_;
  }
  void unshare() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--sharing_ == 0) changed_.notify_all();
  }
  void own() {
    std::unique_lock<std::mutex> lock(mutex_);
    ++waiting_owners_;
    changed_.wait(lock, [&] { return !owned_ && sharing_ == 0; });
    --waiting_owners_;
    owned_ = true;
  }
  void disown() {
    std::lock_guard<std::mutex> lock(mutex_);
    owned_ = false;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int64_t sharing_ = 0;
  int64_t waiting_owners_ = 0;
  bool owned_ = false;
};

// share() on construction, unshare() on destruction, on whichever thread.
class SharedEngineUse {
 public:
  explicit SharedEngineUse(EngineUse& use) : use_(use) { use_.share(); }
  ~SharedEngineUse() { use_.unshare(); }
  SharedEngineUse(const SharedEngineUse&) = delete;
  SharedEngineUse& operator=(const SharedEngineUse&) = delete;

 private:
  EngineUse& use_;
};

class OwnedEngineUse {
 public:
  explicit OwnedEngineUse(EngineUse& use) : use_(use) { use_.own(); }
  ~OwnedEngineUse() { use_.disown(); }
  OwnedEngineUse(const OwnedEngineUse&) = delete;
  OwnedEngineUse& operator=(const OwnedEngineUse&) = delete;

 private:
  EngineUse& use_;
};

}  // namespace rlcore::serve
