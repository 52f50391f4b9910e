// Messages of the control plane between the controller and its workers.
//
// On the wire a message is a ZeroMQ multipart message:
//   frame 0      control header: a JSON object, at most MessageLimits::max_header_bytes
//   frame 1      (when header.batch is true) the Batch wire-format header
//   frames 2...  the Batch's tensor buffers (see rlcore/wire_format.h)
// The control header always has "v" (protocol version), "type", "batch" and
// "frames" (frames after frame 0); each type has its own required fields
// (see validate_control_header). Nothing after frame 0 is decoded until the
// header has been validated and its sender authenticated.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "rlcore/batch.h"
#include "rlcore/export.h"

namespace rlcore::runtime {

inline constexpr int kControlProtocolVersion = 1;

// Bounds on what a peer may send. Frames above max_frame_bytes make ZeroMQ drop
// the connection before anything reaches rlcore.
struct MessageLimits {
  std::size_t max_header_bytes = 64 * 1024;
  std::size_t max_batch_header_bytes = 256u << 20;
  std::size_t max_frames = 1 << 14;
  int64_t max_frame_bytes = int64_t{16} << 30;
  int max_json_depth = 64;
};

// One control-plane message: its header and, when it has a size, a Batch.
struct RLCORE_API Envelope {
  nlohmann::json header = nlohmann::json::object();
  Batch batch;

  const std::string& type() const;
};

// What a worker says about itself in its hello.
struct PeerInfo {
  int64_t rank = -1;  // global rank in the run
  int64_t world_size = 0;
  int64_t local_rank = 0;
  std::string host;
  int64_t pid = 0;
};

RLCORE_API nlohmann::json peer_info_to_json(const PeerInfo& info);
RLCORE_API PeerInfo peer_info_from_json(const nlohmann::json& hello);

// Parses frame 0: size, JSON syntax, nesting depth, then validate_control_header.
// Throws FormatError saying what is wrong; never reads beyond `bytes`.
RLCORE_API nlohmann::json parse_control_header(std::string_view bytes, const MessageLimits& limits);

// Checks the common fields and the fields of the header's type: hello, welcome,
// refused, heartbeat, ready, call, reply, shutdown, bye. Throws FormatError.
RLCORE_API void validate_control_header(const nlohmann::json& header);

// Convenience constructors for the header of each type (without batch/frames).
RLCORE_API nlohmann::json control_header(const std::string& type);

}  // namespace rlcore::runtime
