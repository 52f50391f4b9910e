// Validation of control-plane headers: every field a receiver relies on is checked
// here, before any payload is looked at.
#include "rlcore/core/runtime/control_message.h"

#include <limits>

#include "rlcore/error.h"

namespace rlcore::runtime {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxHostBytes = 255;
constexpr std::size_t kMaxNameBytes = 1024;

[[noreturn]] void fail(const json& header, const std::string& what) {
  std::string type = "?";
  if (header.is_object()) {
    auto it = header.find("type");
    if (it != header.end() && it->is_string()) type = it->get<std::string>();
  }
  throw FormatError("control message '" + type + "': " + what);
}

const json& field(const json& header, const char* name) {
  auto it = header.find(name);
  if (it == header.end()) fail(header, std::string("missing field \"") + name + "\"");
  return *it;
}

void require_string(const json& header, const char* name, std::size_t max_bytes) {
  const json& value = field(header, name);
  if (!value.is_string()) fail(header, std::string("field \"") + name + "\" must be a string");
  if (value.get_ref<const std::string&>().size() > max_bytes) {
    fail(header, std::string("field \"") + name + "\" is longer than " + std::to_string(max_bytes) + " bytes");
  }
}

void require_int(const json& header, const char* name, int64_t min, int64_t max) {
  const json& value = field(header, name);
  if (!value.is_number_integer()) fail(header, std::string("field \"") + name + "\" must be an integer");
  // Unsigned values above int64 range are rejected by the range check below.
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(max)) {
    fail(header, std::string("field \"") + name + "\" is out of range");
  }
  const int64_t number = value.get<int64_t>();
  if (number < min || number > max) {
    fail(header, std::string("field \"") + name + "\" = " + std::to_string(number) + " is outside [" +
                     std::to_string(min) + ", " + std::to_string(max) + "]");
  }
}

void require_bool(const json& header, const char* name) {
  if (!field(header, name).is_boolean()) fail(header, std::string("field \"") + name + "\" must be a boolean");
}

void require_object(const json& header, const char* name) {
  if (!field(header, name).is_object()) fail(header, std::string("field \"") + name + "\" must be an object");
}

void require_array(const json& header, const char* name) {
  if (!field(header, name).is_array()) fail(header, std::string("field \"") + name + "\" must be an array");
}

constexpr int64_t kMaxRank = 1 << 20;
constexpr int64_t kMaxId = int64_t{1} << 53;

void validate_type_fields(const json& header, const std::string& type) {
  if (type == "hello") {
    require_string(header, "secret", kMaxNameBytes);
    require_int(header, "rank", 0, kMaxRank - 1);
    require_int(header, "world_size", 1, kMaxRank);
    require_int(header, "local_rank", 0, kMaxRank - 1);
    require_string(header, "host", kMaxHostBytes);
    require_int(header, "pid", 0, std::numeric_limits<int32_t>::max());
  } else if (type == "welcome") {
    require_object(header, "setup");
    require_int(header, "heartbeat_interval_ms", 1, 3600 * 1000);
    require_int(header, "heartbeat_timeout_ms", 1, 24 * 3600 * 1000);
    require_int(header, "shutdown_grace_ms", 0, 3600 * 1000);
  } else if (type == "refused") {
    require_string(header, "reason", 4096);
  } else if (type == "ready") {
    require_bool(header, "ok");
    if (header["ok"].get<bool>()) {
      require_array(header, "methods");
      require_object(header, "meshes");
    } else {
      require_string(header, "error", 64 * 1024);
    }
  } else if (type == "call") {
    require_int(header, "id", 1, kMaxId);
    require_string(header, "method", kMaxNameBytes);
    require_object(header, "args");
  } else if (type == "reply") {
    require_int(header, "id", 1, kMaxId);
    require_bool(header, "ok");
    if (!header["ok"].get<bool>()) require_string(header, "error", 64 * 1024);
  } else if (type == "probe_reply") {
    require_object(header, "state");
  } else if (type != "heartbeat" && type != "probe" && type != "shutdown" && type != "bye") {
    fail(header, "unknown message type");
  }
}

}  // namespace

const std::string& Envelope::type() const {
  static const std::string kNone;
  auto it = header.find("type");
  return it != header.end() && it->is_string() ? it->get_ref<const std::string&>() : kNone;
}

json peer_info_to_json(const PeerInfo& info) {
  return {{"rank", info.rank},
          {"world_size", info.world_size},
          {"local_rank", info.local_rank},
          {"host", info.host},
          {"pid", info.pid}};
}

PeerInfo peer_info_from_json(const json& hello) {
  PeerInfo info;
  info.rank = hello.at("rank").get<int64_t>();
  info.world_size = hello.at("world_size").get<int64_t>();
  info.local_rank = hello.at("local_rank").get<int64_t>();
  info.host = hello.at("host").get<std::string>();
  info.pid = hello.at("pid").get<int64_t>();
  return info;
}

json parse_control_header(std::string_view bytes, const MessageLimits& limits) {
  if (bytes.size() > limits.max_header_bytes) {
    throw FormatError("control header of " + std::to_string(bytes.size()) + " bytes exceeds the limit of " +
                      std::to_string(limits.max_header_bytes));
  }
  const int max_depth = limits.max_json_depth;
  // Throwing from the callback stops the parser before a hostile nesting depth
  // can exhaust the stack of json's recursive destructor.
  json::parser_callback_t depth_guard = [max_depth](int depth, json::parse_event_t, json&) {
    if (depth > max_depth) throw FormatError("control header nests deeper than " + std::to_string(max_depth));
    return true;
  };
  json header;
  try {
    header = json::parse(bytes.begin(), bytes.end(), depth_guard);
  } catch (const json::exception& e) {
    throw FormatError(std::string("control header is not valid JSON: ") + e.what());
  }
  validate_control_header(header);
  return header;
}

void validate_control_header(const json& header) {
  if (!header.is_object()) throw FormatError("control header is not a JSON object");
  require_int(header, "v", kControlProtocolVersion, kControlProtocolVersion);
  require_string(header, "type", 64);
  require_bool(header, "batch");
  require_int(header, "frames", 0, int64_t{1} << 24);
  const bool has_batch = header["batch"].get<bool>();
  if (!has_batch && header["frames"].get<int64_t>() != 0) fail(header, "frames without a batch");
  if (has_batch && header["frames"].get<int64_t>() < 1) fail(header, "a batch needs at least its header frame");
  validate_type_fields(header, header["type"].get<std::string>());
}

json control_header(const std::string& type) {
  return {{"v", kControlProtocolVersion}, {"type", type}, {"batch", false}, {"frames", 0}};
}

}  // namespace rlcore::runtime
