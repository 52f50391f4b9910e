// ControlServer: admission by secret, heartbeats and loss detection on the
// controller's ROUTER socket. Unadmitted peers get nothing past header validation.
#include "rlcore/core/runtime/control_server.h"

#include <map>
#include <mutex>
#include <set>

#include <spdlog/spdlog.h>

#include "rlcore/core/runtime/errors.h"
#include "rlcore/core/runtime/secret.h"
#include "rlcore/error.h"
#include "runtime/socket_loop.h"

namespace rlcore::runtime {

using detail::Frames;
using Clock = std::chrono::steady_clock;

namespace {

// Warnings about refused traffic stop after this many, so a flood cannot fill the log.
constexpr int64_t kWarningBudget = 200;

std::string describe_hello(const nlohmann::json& header) {
  return "rank " + header["rank"].dump() + ", host " + header["host"].dump() + ", pid " + header["pid"].dump();
}

WorkerAddress address_of(const PeerInfo& peer) { return WorkerAddress{peer.rank, peer.host, peer.pid}; }

}  // namespace

struct ControlServer::Impl {
  struct Peer {
    PeerInfo info;
    Clock::time_point last_seen;
  };

  ControlServerOptions options;
  Handlers handlers;
  mutable std::mutex mutex;
  std::map<std::string, Peer> peers;  // by routing identity
  std::map<int64_t, std::string> identity_of_rank;
  std::set<std::string> gone;  // identities of lost or departed workers
  ControlServerStats stats;
  int64_t warnings_left = kWarningBudget;
  Clock::time_point next_heartbeat = Clock::now();
  std::unique_ptr<detail::SocketLoop> loop;

  template <class... Args>
  void warn_refused(const char* format, Args&&... args) {
    std::lock_guard<std::mutex> lock(mutex);
    if (warnings_left <= 0) return;
    if (--warnings_left == 0) {
      spdlog::warn("control plane: further refused messages are counted but not logged");
      return;
    }
    spdlog::warn(fmt::runtime(format), std::forward<Args>(args)...);
  }

  void post(const std::string& identity, Frames frames) {
    frames.insert(frames.begin(), zmq::message_t(identity.data(), identity.size()));
    loop->post(std::move(frames));
  }

  void refuse(const std::string& identity, const std::string& reason) {
    nlohmann::json header = control_header("refused");
    header["reason"] = reason;
    post(identity, detail::to_frames(header, nullptr));
  }

  void on_frames(Frames& frames) {
    if (frames.size() < 2) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++stats.dropped_messages;
      }
      warn_refused("control plane: dropped a message without a header from {}", detail::peer_address(frames.front()));
      return;
    }
    const std::string identity = frames[0].to_string();
    const std::string address = detail::peer_address(frames[1]);
    nlohmann::json header;
    try {
      header = parse_control_header(frames[1].to_string_view(), options.limits);
    } catch (const FormatError& e) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++stats.dropped_messages;
      }
      warn_refused("control plane: dropped a malformed message from {}: {}", address, e.what());
      return;
    }
    PeerInfo peer;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (gone.count(identity)) return;  // a late message from a worker already reported
      auto it = peers.find(identity);
      if (it != peers.end()) {
        it->second.last_seen = Clock::now();
        peer = it->second.info;
      }
    }
    if (peer.rank < 0) {
      admit(identity, address, header);
      return;
    }
    deliver(peer, header, frames);
  }

  void admit(const std::string& identity, const std::string& address, const nlohmann::json& header) {
    if (header["type"] != "hello" || header["batch"].get<bool>()) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++stats.dropped_messages;
      }
      warn_refused("control plane: dropped a '{}' message from {}, which has not said hello",
                   header["type"].get<std::string>(), address);
      return;
    }
    const PeerInfo peer = peer_info_from_json(header);
    std::string reason;
    if (!secrets_equal(options.secret, header["secret"].get<std::string>())) {
      reason = "wrong secret (set RLCORE_SECRET to the controller's secret)";
    } else {
      std::lock_guard<std::mutex> lock(mutex);
      auto existing = identity_of_rank.find(peer.rank);
      if (existing != identity_of_rank.end()) {
        reason = "rank " + std::to_string(peer.rank) + " is already connected as " +
                 address_of(peers[existing->second].info).describe();
      }
    }
    nlohmann::json setup;
    if (reason.empty()) {
      try {
        setup = handlers.on_hello ? handlers.on_hello(peer) : nlohmann::json::object();
      } catch (const std::exception& e) {
        reason = e.what();
      }
    }
    if (!reason.empty()) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++stats.refused_hellos;
      }
      warn_refused("control plane: refused hello from {} ({}): {}", address, describe_hello(header), reason);
      refuse(identity, reason);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      peers[identity] = Peer{peer, Clock::now()};
      identity_of_rank[peer.rank] = identity;
    }
    spdlog::debug("control plane: admitted {} from {}", address_of(peer).describe(), address);
    nlohmann::json welcome = control_header("welcome");
    welcome["setup"] = std::move(setup);
    welcome["heartbeat_interval_ms"] = options.heartbeat_interval.count();
    welcome["heartbeat_timeout_ms"] = options.heartbeat_timeout.count();
    welcome["shutdown_grace_ms"] = options.shutdown_grace.count();
    post(identity, detail::to_frames(welcome, nullptr));
  }

  void deliver(const PeerInfo& peer, const nlohmann::json& header, Frames& frames) {
    const std::string& type = header["type"].get_ref<const std::string&>();
    if (type == "heartbeat") return;
    if (type != "ready" && type != "reply" && type != "bye" && type != "probe_reply") {
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++stats.dropped_messages;
      }
      warn_refused("control plane: dropped a '{}' message from worker {}", type, address_of(peer).describe());
      return;
    }
    Envelope message;
    message.header = header;
    try {
      message.batch = detail::decode_payload(header, frames, 1, options.limits);
    } catch (const Error& e) {
      if (type != "reply") {
        warn_refused("control plane: dropped a '{}' message from worker {}: {}", type, address_of(peer).describe(),
                     e.what());
        return;
      }
      // The call must still end, so a bad payload becomes the call's error.
      message.header["ok"] = false;
      message.header["error"] = std::string("the reply could not be decoded: ") + e.what();
    }
    if (handlers.on_message) handlers.on_message(peer, std::move(message));
  }

  // Removes `identity` and reports it unless `quiet`.
  void drop_peer(const std::string& identity, const std::string& reason, bool quiet) {
    PeerInfo info;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = peers.find(identity);
      if (it == peers.end()) return;
      info = it->second.info;
      identity_of_rank.erase(info.rank);
      peers.erase(it);
      gone.insert(identity);
    }
    if (quiet) return;
    spdlog::error("control plane: worker {} lost: {}", address_of(info).describe(), reason);
    if (handlers.on_lost) handlers.on_lost(info, reason);
  }

  void on_tick() {
    const auto now = Clock::now();
    std::vector<std::pair<std::string, std::string>> silent;
    std::vector<std::string> identities;
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (const auto& [identity, peer] : peers) {
        const auto quiet_for = now - peer.last_seen;
        if (quiet_for > options.heartbeat_timeout) {
          const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(quiet_for).count();
          silent.emplace_back(identity, "no message or heartbeat for " + std::to_string(ms) + " ms (timeout " +
                                            std::to_string(options.heartbeat_timeout.count()) + " ms)");
        } else {
          identities.push_back(identity);
        }
      }
    }
    for (const auto& [identity, reason] : silent) drop_peer(identity, reason, false);
    if (now >= next_heartbeat) {
      next_heartbeat = now + options.heartbeat_interval;
      for (const auto& identity : identities) post(identity, detail::to_frames(control_header("heartbeat"), nullptr));
    }
    if (handlers.on_tick) handlers.on_tick();
  }

  void on_monitor(int event, const std::string& endpoint) {
    std::lock_guard<std::mutex> lock(mutex);
    if (event == ZMQ_EVENT_ACCEPTED) {
      ++stats.connections;
    } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL || event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
               event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      ++stats.handshake_failures;
      if (warnings_left > 0) {
        --warnings_left;
        spdlog::warn("control plane: a connection to {} sent bytes that are not a ZeroMQ handshake; closed it",
                     endpoint);
      }
    }
  }
};

ControlServer::ControlServer(ControlServerOptions options, Handlers handlers) : impl_(std::make_unique<Impl>()) {
  if (options.secret.empty()) throw ValueError("ControlServer needs a non-empty secret");
  impl_->options = std::move(options);
  impl_->handlers = std::move(handlers);
  Impl* impl = impl_.get();
  detail::SocketLoop::Callbacks callbacks;
  callbacks.on_message = [impl](Frames& frames) { impl->on_frames(frames); };
  callbacks.on_tick = [impl] { impl->on_tick(); };
  callbacks.on_monitor_event = [impl](int event, const std::string& endpoint) { impl->on_monitor(event, endpoint); };
  const std::string bind = impl_->options.bind;
  try {
    impl_->loop = std::make_unique<detail::SocketLoop>(
        zmq::socket_type::router, impl_->options.limits, [&](zmq::socket_t& socket) { socket.bind(bind); },
        std::move(callbacks), detail::kControlTick);
  } catch (const zmq::error_t& e) {
    throw IoError("control plane: cannot bind " + bind + ": " + e.what());
  }
  spdlog::debug("control plane: listening on {}", impl_->loop->endpoint());
}

ControlServer::~ControlServer() { close(); }

std::string ControlServer::endpoint() const { return impl_->loop->endpoint(); }

void ControlServer::send(int64_t rank, const Envelope& message) {
  if (!message.batch.has_size()) {
    send_encoded(rank, message.header, nullptr);
    return;
  }
  const WireMessage wire = encode_batch(message.batch);
  send_encoded(rank, message.header, &wire);
}

void ControlServer::send_encoded(int64_t rank, const nlohmann::json& header, const WireMessage* batch) {
  std::string identity;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    auto it = impl_->identity_of_rank.find(rank);
    if (it == impl_->identity_of_rank.end()) {
      throw WorkerLostError(WorkerAddress{rank, "", 0}, "worker rank " + std::to_string(rank) + " is not connected");
    }
    identity = it->second;
  }
  impl_->post(identity, detail::to_frames(header, batch));
}

void ControlServer::declare_lost(int64_t rank, const std::string& reason) {
  std::string identity;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    auto it = impl_->identity_of_rank.find(rank);
    if (it == impl_->identity_of_rank.end()) return;
    identity = it->second;
  }
  impl_->drop_peer(identity, reason, false);
}

void ControlServer::forget(int64_t rank) {
  std::string identity;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    auto it = impl_->identity_of_rank.find(rank);
    if (it == impl_->identity_of_rank.end()) return;
    identity = it->second;
  }
  impl_->drop_peer(identity, "", true);
}

bool ControlServer::connected(int64_t rank) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->identity_of_rank.count(rank) > 0;
}

ControlServerStats ControlServer::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats;
}

void ControlServer::close() {
  if (impl_ && impl_->loop) impl_->loop->stop();
}

}  // namespace rlcore::runtime
