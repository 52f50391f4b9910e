// The controller's end of the control plane: a ZeroMQ ROUTER that admits workers
// whose hello carries the run's secret, exchanges heartbeats with them, and
// reports a worker that dies or goes silent, naming its rank, host and pid.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "rlcore/core/runtime/control_message.h"
#include "rlcore/export.h"
#include "rlcore/wire_format.h"

namespace rlcore::runtime {

struct ControlServerOptions {
  // tcp://HOST:PORT (PORT 0: any free port) or ipc://PATH.
  std::string bind = "tcp://127.0.0.1:0";
  std::string secret;
  std::chrono::milliseconds heartbeat_interval{1000};
  // A worker silent for this long is lost.
  std::chrono::milliseconds heartbeat_timeout{10000};
  // How long a worker may take to stop after a shutdown before it exits on its own.
  std::chrono::milliseconds shutdown_grace{5000};
  MessageLimits limits;
};

// Counters of what the server refused, for logs and tests.
struct ControlServerStats {
  int64_t refused_hellos = 0;      // wrong secret, bad rank, duplicate rank
  int64_t dropped_messages = 0;    // unauthenticated sender or malformed message
  int64_t handshake_failures = 0;  // bytes that were not a ZeroMQ handshake
  int64_t connections = 0;         // TCP/IPC connections accepted
};

class RLCORE_API ControlServer {
 public:
  // All handlers run on the server's I/O thread and must not block for long.
  struct Handlers {
    // Decides on an authenticated hello: returns the welcome's "setup" object,
    // or throws rlcore::Error whose message is sent back as the refusal reason.
    std::function<nlohmann::json(const PeerInfo& peer)> on_hello;
    // Any other message from an admitted worker (ready, reply, bye).
    std::function<void(const PeerInfo& peer, Envelope message)> on_message;
    // The worker is gone: dead, silent past the heartbeat timeout, or declared lost.
    std::function<void(const PeerInfo& peer, const std::string& reason)> on_lost;
    // Every ~100 ms.
    std::function<void()> on_tick;
  };

  // Binds and starts the I/O thread. Throws IoError when the address cannot be bound.
  ControlServer(ControlServerOptions options, Handlers handlers);
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // The bound endpoint with the real port, e.g. tcp://127.0.0.1:41234.
  std::string endpoint() const;

  // Thread-safe. Throws WorkerLostError when `rank` is not connected.
  void send(int64_t rank, const Envelope& message);
  // Sends frames already built by the caller (used to encode one Batch once for many ranks).
  void send_encoded(int64_t rank, const nlohmann::json& header, const WireMessage* batch);
  // Reports `rank` as lost (e.g. the launcher saw its process exit); no-op when not connected.
  void declare_lost(int64_t rank, const std::string& reason);
  // Forgets `rank` without reporting it (it said bye).
  void forget(int64_t rank);
  bool connected(int64_t rank) const;

  ControlServerStats stats() const;
  // Stops the I/O thread after sending what is queued. Idempotent.
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlcore::runtime
