// ControlClient: hello/welcome, heartbeats and the controller-silence deadline on
// the worker's DEALER socket.
#include "rlcore/core/runtime/control_client.h"

#include <condition_variable>
#include <deque>
#include <mutex>

#include <spdlog/spdlog.h>

#include "rlcore/core/runtime/errors.h"
#include "rlcore/error.h"
#include "runtime/socket_loop.h"

namespace rlcore::runtime {

using detail::Frames;
using Clock = std::chrono::steady_clock;

struct ControlClient::Impl {
  ControlClientOptions options;
  AbandonHandler on_abandon;
  std::mutex mutex;
  std::condition_variable changed;
  std::optional<Welcome> welcome;
  std::optional<std::string> refusal;
  std::deque<Envelope> inbox;
  Clock::time_point last_seen = Clock::now();
  Clock::time_point next_heartbeat = Clock::now();
  std::optional<Clock::time_point> shutdown_at;
  bool abandoned = false;
  bool closing = false;
  std::unique_ptr<detail::SocketLoop> loop;

  void on_frames(Frames& frames) {
    nlohmann::json header;
    try {
      header = parse_control_header(frames[0].to_string_view(), options.limits);
    } catch (const FormatError& e) {
      spdlog::warn("control plane: dropped a malformed message from the controller: {}", e.what());
      return;
    }
    const std::string type = header["type"].get<std::string>();
    std::unique_lock<std::mutex> lock(mutex);
    last_seen = Clock::now();
    if (!welcome) {
      if (type == "welcome") {
        Welcome w;
        w.setup = header["setup"];
        w.heartbeat_interval = std::chrono::milliseconds(header["heartbeat_interval_ms"].get<int64_t>());
        w.heartbeat_timeout = std::chrono::milliseconds(header["heartbeat_timeout_ms"].get<int64_t>());
        w.shutdown_grace = std::chrono::milliseconds(header["shutdown_grace_ms"].get<int64_t>());
        welcome = std::move(w);
      } else if (type == "refused") {
        refusal = header["reason"].get<std::string>();
      } else {
        spdlog::warn("control plane: dropped a '{}' message that came before the welcome", type);
        return;
      }
      changed.notify_all();
      return;
    }
    if (type == "heartbeat") return;
    if (type == "shutdown") {
      if (!shutdown_at) shutdown_at = Clock::now();
      inbox.push_back(Envelope{header, Batch()});
      changed.notify_all();
      return;
    }
    if (type == "probe") {
      lock.unlock();
      nlohmann::json answer = control_header("probe_reply");
      answer["id"] = header["id"];
      answer["state"] = options.probe ? options.probe() : nlohmann::json::object();
      loop->post(detail::to_frames(answer, nullptr));
      return;
    }
    if (type != "call") {
      spdlog::warn("control plane: dropped an unexpected '{}' message from the controller", type);
      return;
    }
    lock.unlock();
    Envelope call{header, Batch()};
    try {
      call.batch = detail::decode_payload(header, frames, 0, options.limits);
    } catch (const Error& e) {
      nlohmann::json reply = control_header("reply");
      reply["id"] = header["id"];
      reply["ok"] = false;
      reply["error"] = std::string("the call's payload could not be decoded: ") + e.what();
      loop->post(detail::to_frames(reply, nullptr));
      return;
    }
    lock.lock();
    inbox.push_back(std::move(call));
    changed.notify_all();
  }

  void abandon(const std::string& reason) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (abandoned) return;
      abandoned = true;
      changed.notify_all();
    }
    if (on_abandon) on_abandon(reason);
  }

  void on_tick() {
    const auto now = Clock::now();
    std::string reason;
    bool beat = false;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!welcome || abandoned || closing) return;
      const auto silent = now - last_seen;
      if (silent > welcome->heartbeat_timeout) {
        reason = "the controller at " + options.endpoint + " has been silent for " +
                 std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(silent).count()) +
                 " ms (timeout " + std::to_string(welcome->heartbeat_timeout.count()) + " ms)";
      } else if (shutdown_at && now - *shutdown_at > welcome->shutdown_grace) {
        reason = "the running method did not return within the shutdown grace of " +
                 std::to_string(welcome->shutdown_grace.count()) + " ms";
      }
      if (now >= next_heartbeat) {
        next_heartbeat = now + welcome->heartbeat_interval;
        beat = true;
      }
    }
    if (!reason.empty()) {
      abandon(reason);
      return;
    }
    if (beat) loop->post(detail::to_frames(control_header("heartbeat"), nullptr));
  }
};

ControlClient::ControlClient(ControlClientOptions options, AbandonHandler on_abandon)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->on_abandon = std::move(on_abandon);
  Impl* impl = impl_.get();
  detail::SocketLoop::Callbacks callbacks;
  callbacks.on_message = [impl](Frames& frames) { impl->on_frames(frames); };
  callbacks.on_tick = [impl] { impl->on_tick(); };
  const std::string endpoint = impl_->options.endpoint;
  try {
    impl_->loop = std::make_unique<detail::SocketLoop>(
        zmq::socket_type::dealer, impl_->options.limits, [&](zmq::socket_t& socket) { socket.connect(endpoint); },
        std::move(callbacks), detail::kControlTick);
  } catch (const zmq::error_t& e) {
    throw ConfigError("control plane: cannot connect to '" + endpoint + "': " + e.what());
  }
}

ControlClient::~ControlClient() { close(std::chrono::milliseconds(0)); }

Welcome ControlClient::connect() {
  nlohmann::json hello = control_header("hello");
  hello.update(peer_info_to_json(impl_->options.self));
  hello["secret"] = impl_->options.secret;
  impl_->loop->post(detail::to_frames(hello, nullptr));
  std::unique_lock<std::mutex> lock(impl_->mutex);
  const bool answered =
      impl_->changed.wait_for(lock, impl_->options.connect_timeout, [&] { return impl_->welcome || impl_->refusal; });
  if (!answered) {
    throw TimeoutError("no answer from the controller at " + impl_->options.endpoint + " within " +
                       std::to_string(impl_->options.connect_timeout.count()) + " ms");
  }
  if (impl_->refusal) {
    throw ConfigError("the controller at " + impl_->options.endpoint + " refused this worker: " + *impl_->refusal);
  }
  impl_->last_seen = Clock::now();
  return *impl_->welcome;
}

std::optional<Envelope> ControlClient::receive(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(impl_->mutex);
  if (!impl_->changed.wait_for(lock, timeout, [&] { return !impl_->inbox.empty() || impl_->abandoned; })) {
    return std::nullopt;
  }
  if (impl_->inbox.empty()) return std::nullopt;
  Envelope message = std::move(impl_->inbox.front());
  impl_->inbox.pop_front();
  return message;
}

void ControlClient::send(const Envelope& message) { impl_->loop->post(detail::to_frames(message)); }

bool ControlClient::abandoned() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->abandoned;
}

void ControlClient::close(std::chrono::milliseconds linger) {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->closing = true;
  }
  if (impl_->loop) impl_->loop->stop(linger);
}

}  // namespace rlcore::runtime
