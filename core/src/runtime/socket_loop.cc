// The I/O thread behind ControlServer and ControlClient, and the conversion
// between Envelopes and ZeroMQ frames (zero-copy for tensor buffers).
#include "runtime/socket_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include "rlcore/error.h"

namespace rlcore::runtime::detail {

namespace {

void release_tensor(void* /*data*/, void* hint) { delete static_cast<at::Tensor*>(hint); }

zmq::message_t tensor_frame(const at::Tensor& buffer) {
  if (buffer.nbytes() == 0) return zmq::message_t();
  auto* held = new at::Tensor(buffer);
  return zmq::message_t(held->data_ptr(), held->nbytes(), &release_tensor, held);
}

}  // namespace

Frames to_frames(nlohmann::json header, const WireMessage* batch) {
  header["batch"] = batch != nullptr;
  header["frames"] = batch ? 1 + batch->buffers.size() : 0;
  Frames frames;
  frames.reserve(batch ? 2 + batch->buffers.size() : 1);
  const std::string text = header.dump();
  frames.emplace_back(text.data(), text.size());
  if (batch) {
    frames.emplace_back(batch->header.data(), batch->header.size());
    for (const auto& buffer : batch->buffers) frames.push_back(tensor_frame(buffer));
  }
  return frames;
}

Frames to_frames(const Envelope& envelope) {
  if (!envelope.batch.has_size()) return to_frames(envelope.header, nullptr);
  const WireMessage wire = encode_batch(envelope.batch);
  return to_frames(envelope.header, &wire);
}

Batch decode_payload(const nlohmann::json& header, Frames& frames, std::size_t first, const MessageLimits& limits) {
  const auto expected = static_cast<std::size_t>(header.at("frames").get<int64_t>());
  const std::size_t present = frames.size() - first - 1;
  if (present != expected) {
    throw FormatError("control message '" + header.at("type").get<std::string>() + "' announces " +
                      std::to_string(expected) + " payload frames but carries " + std::to_string(present));
  }
  if (!header.at("batch").get<bool>()) return Batch();
  const zmq::message_t& batch_header = frames[first + 1];
  if (batch_header.size() > limits.max_batch_header_bytes) {
    throw FormatError("batch header of " + std::to_string(batch_header.size()) + " bytes exceeds the limit of " +
                      std::to_string(limits.max_batch_header_bytes));
  }
  auto owned = std::make_shared<Frames>();
  owned->reserve(present - 1);
  for (std::size_t i = first + 2; i < frames.size(); ++i) owned->push_back(std::move(frames[i]));
  std::vector<std::string_view> buffers;
  buffers.reserve(owned->size());
  for (const auto& frame : *owned) buffers.emplace_back(static_cast<const char*>(frame.data()), frame.size());
  return decode_batch(std::string_view(static_cast<const char*>(batch_header.data()), batch_header.size()), buffers,
                      std::move(owned));
}

std::string peer_address(const zmq::message_t& frame) {
  // zmq_msg_gets is only defined for frames that came off a socket.
  const char* address = zmq_msg_gets(const_cast<zmq_msg_t*>(frame.handle()), "Peer-Address");
  return address ? address : "unknown address";
}

SocketLoop::SocketLoop(zmq::socket_type type, const MessageLimits& limits,
                       const std::function<void(zmq::socket_t&)>& setup, Callbacks callbacks,
                       std::chrono::milliseconds tick)
    : context_(1), socket_(context_, type), callbacks_(std::move(callbacks)), tick_(tick), limits_(limits) {
  socket_.set(zmq::sockopt::sndhwm, 0);
  socket_.set(zmq::sockopt::rcvhwm, 0);
  socket_.set(zmq::sockopt::maxmsgsize, limits.max_frame_bytes);
  socket_.set(zmq::sockopt::linger, 0);
  if (type == zmq::socket_type::router) socket_.set(zmq::sockopt::router_mandatory, 1);
  if (callbacks_.on_monitor_event) {
    const std::string address = "inproc://monitor-" + std::to_string(reinterpret_cast<uintptr_t>(this));
    const int events = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                       ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_ACCEPTED;
    if (zmq_socket_monitor(socket_.handle(), address.c_str(), events) != 0) throw zmq::error_t();
    monitor_ = zmq::socket_t(context_, zmq::socket_type::pair);
    monitor_.connect(address);
  }
  setup(socket_);
  endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw IoError(std::string("eventfd: ") + std::strerror(errno));
  thread_ = std::thread([this] { run(); });
}

SocketLoop::~SocketLoop() {
  stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void SocketLoop::post(Frames frames) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    outgoing_.push_back(std::move(frames));
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t written = ::write(wake_fd_, &one, sizeof(one));
}

void SocketLoop::stop(std::chrono::milliseconds linger) {
  if (!thread_.joinable()) return;
  linger_ = linger;
  stopping_ = true;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t written = ::write(wake_fd_, &one, sizeof(one));
  thread_.join();
}

void SocketLoop::drain_outgoing() {
  std::deque<Frames> batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batch.swap(outgoing_);
  }
  for (auto& frames : batch) {
    try {
      for (std::size_t i = 0; i < frames.size(); ++i) {
        const auto flags =
            i + 1 < frames.size() ? zmq::send_flags::sndmore | zmq::send_flags::dontwait : zmq::send_flags::dontwait;
        if (!socket_.send(frames[i], flags)) {
          spdlog::warn("control plane: send queue full, message dropped");
          break;
        }
      }
    } catch (const zmq::error_t& e) {
      // EHOSTUNREACH: the peer disconnected; liveness tracking reports it.
      spdlog::debug("control plane: message not sent: {}", e.what());
    }
  }
}

void SocketLoop::receive_all() {
  for (;;) {
    Frames frames;
    zmq::message_t frame;
    if (!socket_.recv(frame, zmq::recv_flags::dontwait)) return;
    bool too_many = false;
    bool more = frame.more();
    frames.push_back(std::move(frame));
    // A multipart message arrives whole, so the remaining parts never block.
    while (more) {
      zmq::message_t part;
      (void)socket_.recv(part, zmq::recv_flags::none);
      more = part.more();
      if (frames.size() > limits_.max_frames + 2) {
        too_many = true;
      } else {
        frames.push_back(std::move(part));
      }
    }
    if (too_many) {
      spdlog::warn("control plane: dropped a message of more than {} frames from {}", limits_.max_frames,
                   peer_address(frames.back()));
      continue;
    }
    try {
      callbacks_.on_message(frames);
    } catch (const std::exception& e) {
      spdlog::error("control plane: message handler failed: {}", e.what());
    }
  }
}

void SocketLoop::receive_monitor() {
  for (;;) {
    zmq::message_t event;
    if (!monitor_.recv(event, zmq::recv_flags::dontwait)) return;
    zmq::message_t address;
    if (event.more()) (void)monitor_.recv(address, zmq::recv_flags::none);
    if (event.size() < 6) continue;
    uint16_t id = 0;
    std::memcpy(&id, event.data(), sizeof(id));
    try {
      callbacks_.on_monitor_event(id, address.to_string());
    } catch (const std::exception& e) {
      spdlog::error("control plane: monitor handler failed: {}", e.what());
    }
  }
}

void SocketLoop::run() {
  auto next_tick = std::chrono::steady_clock::now() + tick_;
  for (;;) {
    drain_outgoing();
    if (stopping_) break;
    std::vector<zmq::pollitem_t> items = {{socket_.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
    if (monitor_) items.push_back({monitor_.handle(), 0, ZMQ_POLLIN, 0});
    const auto now = std::chrono::steady_clock::now();
    const auto wait = std::max<std::chrono::milliseconds>(
        std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - now));
    try {
      zmq::poll(items.data(), items.size(), wait);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) spdlog::error("control plane: poll failed: {}", e.what());
    }
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t count = 0;
      [[maybe_unused]] ssize_t got = ::read(wake_fd_, &count, sizeof(count));
    }
    if (items[0].revents & ZMQ_POLLIN) receive_all();
    if (monitor_ && (items[2].revents & ZMQ_POLLIN)) receive_monitor();
    if (std::chrono::steady_clock::now() >= next_tick) {
      next_tick = std::chrono::steady_clock::now() + tick_;
      if (callbacks_.on_tick) {
        try {
          callbacks_.on_tick();
        } catch (const std::exception& e) {
          spdlog::error("control plane: tick handler failed: {}", e.what());
        }
      }
    }
  }
  // Give queued messages (a shutdown, a final reply) a bounded chance to leave.
  socket_.set(zmq::sockopt::linger, static_cast<int>(linger_.count()));
  if (monitor_) {
    zmq_socket_monitor(socket_.handle(), nullptr, 0);
    monitor_.close();
  }
  socket_.close();
}

}  // namespace rlcore::runtime::detail
