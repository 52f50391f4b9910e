// ResponseSink, and settle(): a deferred answer waited for by its caller.
#include <condition_variable>
#include <mutex>

#include "rlcore/core/serve/api.h"

namespace rlcore::serve {

ResponseSink::~ResponseSink() = default;

namespace {

class CollectingSink : public ResponseSink {
 public:
  void reply(int status, std::string body) override {
    std::lock_guard<std::mutex> lock(mutex_);
    answer_.status = status;
    answer_.body = std::move(body);
    ended_ = true;
    changed_.notify_all();
  }
  void event(std::string event) override {
    std::lock_guard<std::mutex> lock(mutex_);
    answer_.events.push_back(std::move(event));
  }
  void end_events() override {
    std::lock_guard<std::mutex> lock(mutex_);
    ended_ = true;
    changed_.notify_all();
  }
  void on_cancel(std::function<void()>) override {}  // the caller always reads

  ApiResponse wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return ended_; });
    return std::move(answer_);
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  ApiResponse answer_;
  bool ended_ = false;
};

}  // namespace

ApiResponse settle(ApiResponse response) {
  if (!response.deferred) return response;
  auto sink = std::make_shared<CollectingSink>();
  response.deferred(sink);
  return sink->wait();
}

}  // namespace rlcore::serve
