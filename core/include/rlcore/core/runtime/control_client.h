// The worker's end of the control plane: a ZeroMQ DEALER that says hello with the
// run's secret, sends heartbeats, queues the controller's calls for the worker's
// executor, and gives up when the controller goes silent.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "rlcore/core/runtime/control_message.h"
#include "rlcore/export.h"

namespace rlcore::runtime {

struct ControlClientOptions {
  std::string endpoint;  // tcp://HOST:PORT or ipc://PATH
  std::string secret;
  PeerInfo self;
  // Bound on the wait for the controller's welcome.
  std::chrono::milliseconds connect_timeout{60000};
  MessageLimits limits;
  // Answers the controller's "probe" on the I/O thread, while the main thread
  // may be stuck in a method or a collective (null: answered with {}).
  std::function<nlohmann::json()> probe;
};

// What the controller answered to hello.
struct Welcome {
  nlohmann::json setup;
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::chrono::milliseconds shutdown_grace{5000};
};

class RLCORE_API ControlClient {
 public:
  // Runs on the I/O thread when the worker must stop without waiting for the
  // method it is running: the controller has been silent past the heartbeat
  // timeout, or a shutdown was not honoured within the grace period. The worker
  // process exits from it; tests record it.
  using AbandonHandler = std::function<void(const std::string& reason)>;

  ControlClient(ControlClientOptions options, AbandonHandler on_abandon);
  ~ControlClient();
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  // Sends hello and waits for the answer. Throws ConfigError when refused (the
  // message carries the controller's reason) and TimeoutError past connect_timeout.
  Welcome connect();

  // The next call or shutdown from the controller; nullopt when `timeout` passes first.
  std::optional<Envelope> receive(std::chrono::milliseconds timeout);
  // Thread-safe.
  void send(const Envelope& message);
  bool abandoned() const;
  // Sends what is queued (bounded by `linger`) and stops the I/O thread.
  void close(std::chrono::milliseconds linger = std::chrono::milliseconds(1000));

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlcore::runtime
