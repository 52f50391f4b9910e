// Private to the core: one ZeroMQ socket owned by one I/O thread (ZeroMQ sockets
// are not thread-safe), with a thread-safe outgoing queue woken through an
// eventfd, a periodic tick, and optional connection-event monitoring.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "rlcore/core/runtime/control_message.h"
#include "rlcore/wire_format.h"

namespace rlcore::runtime::detail {

using Frames = std::vector<zmq::message_t>;

// Frames of `envelope` after the routing prefix: the header (with "batch" and
// "frames" filled in), then the batch header and tensor buffers, sent without
// copying (each frame holds a reference to its tensor until ZeroMQ is done).
Frames to_frames(nlohmann::json header, const WireMessage* batch);
Frames to_frames(const Envelope& envelope);

// Decodes the payload frames [first + 1, end) described by an already validated
// header (frames[first]). Tensor frames are moved out of `frames` and aliased
// by the Batch's tensors (no copy). Throws FormatError on any inconsistency.
Batch decode_payload(const nlohmann::json& header, Frames& frames, std::size_t first, const MessageLimits& limits);

// "tcp://1.2.3.4:5" for a frame's sender, when ZeroMQ knows it.
std::string peer_address(const zmq::message_t& frame);

// How often both ends of the control plane wake up for their periodic work
// (heartbeats, deadlines) when no message arrives.
constexpr std::chrono::milliseconds kControlTick{100};

class SocketLoop {
 public:
  struct Callbacks {
    std::function<void(Frames& frames)> on_message;
    std::function<void()> on_tick;
    // ZMQ_EVENT_* and the address it concerns (monitoring enabled only when set).
    std::function<void(int event, const std::string& address)> on_monitor_event;
  };

  // `setup` binds or connects the socket; it runs on the caller's thread so
  // errors (address in use) reach the caller. Starts the I/O thread.
  SocketLoop(zmq::socket_type type, const MessageLimits& limits, const std::function<void(zmq::socket_t&)>& setup,
             Callbacks callbacks, std::chrono::milliseconds tick);
  ~SocketLoop();
  SocketLoop(const SocketLoop&) = delete;
  SocketLoop& operator=(const SocketLoop&) = delete;

  // Thread-safe; sent by the I/O thread in order.
  void post(Frames frames);
  // Sends what is queued (waiting up to `linger` for delivery), then joins the thread.
  void stop(std::chrono::milliseconds linger = std::chrono::milliseconds(1000));
  std::string endpoint() const { return endpoint_; }

 private:
  void run();
  void drain_outgoing();
  void receive_all();
  void receive_monitor();

  zmq::context_t context_;
  zmq::socket_t socket_;
  zmq::socket_t monitor_;
  std::string endpoint_;
  Callbacks callbacks_;
  std::chrono::milliseconds tick_;
  MessageLimits limits_;
  int wake_fd_ = -1;
  std::mutex mutex_;
  std::deque<Frames> outgoing_;
  std::atomic<bool> stopping_{false};
  std::chrono::milliseconds linger_{1000};
  std::thread thread_;
};

}  // namespace rlcore::runtime::detail
