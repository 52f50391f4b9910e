// Batch encode/decode to header + frames, and the one-buffer pack/unpack framing.
// Decoding trusts nothing: every length is checked against the bytes that exist
// before anything is allocated.
#include "rlcore/wire_format.h"

#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "rlcore/string_join.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format stores tensor bytes little-endian, as this host does");

namespace rlcore {

using nlohmann::json;

namespace {

constexpr int64_t kMaxDims = 64;
// nlohmann copies and compares recursively; a hostile header must not exhaust the stack.
constexpr int kMaxJsonDepth = 128;
constexpr uint64_t kWireInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

constexpr char kMagic[4] = {'R', 'L', 'C', 'B'};
constexpr uint32_t kPackVersion = 1;
constexpr size_t kPreambleBytes = 24;  // magic, version, header bytes, frame count

struct WireDtypeName {
  at::ScalarType type;
  const char* name;
};

constexpr WireDtypeName kWireDtypes[] = {
    {at::kBool, "bool"},     {at::kByte, "uint8"},     {at::kChar, "int8"},    {at::kShort, "int16"},
    {at::kInt, "int32"},     {at::kLong, "int64"},     {at::kHalf, "float16"}, {at::kBFloat16, "bfloat16"},
    {at::kFloat, "float32"}, {at::kDouble, "float64"},
};

const char* dtype_name(at::ScalarType type) {
  for (const auto& dtype : kWireDtypes) {
    if (dtype.type == type) return dtype.name;
  }
  return nullptr;
}

std::optional<at::ScalarType> dtype_from_name(const std::string& name) {
  for (const auto& dtype : kWireDtypes) {
    if (name == dtype.name) return dtype.type;
  }
  return std::nullopt;
}

std::string known_dtypes() {
  return join(kWireDtypes, ", ", [](const auto& dtype) { return std::string(dtype.name); });
}

// The JSON text of a value, cut short so a hostile header cannot bloat a message.
std::string preview(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() > 64 ? text.substr(0, 61) + "..." : text;
}

std::string_view bytes_of(const at::Tensor& buffer, size_t index, const char* who) {
  if (!buffer.defined() || !buffer.device().is_cpu() || !buffer.is_contiguous()) {
    throw ValueError(std::string(who) + ": buffers[" + std::to_string(index) + "] is not a contiguous CPU tensor");
  }
  if (buffer.nbytes() == 0) return {};
  return {static_cast<const char*>(buffer.data_ptr()), buffer.nbytes()};
}

}  // namespace

WireMessage encode_batch(const Batch& batch) {
  if (!batch.meta_info().is_object()) {
    throw ValueError("encode_batch: meta_info must be a JSON object, not " +
                     std::string(batch.meta_info().type_name()));
  }
  WireMessage message;
  json tensors = json::array();
  for (const auto& key : batch.tensor_keys()) {
    const at::Tensor& tensor = batch.tensor(key);
    const char* dtype = dtype_name(tensor.scalar_type());
    if (dtype == nullptr || tensor.layout() != at::kStrided) {
      throw ValueError("encode_batch: tensor column '" + key + "' (" +
                       std::string(c10::toString(tensor.scalar_type())) + ", layout " + c10::str(tensor.layout()) +
                       ") cannot be encoded; supported dtypes (strided only): " + known_dtypes());
    }
    at::Tensor buffer = tensor.cpu().resolve_conj().resolve_neg().contiguous();
    tensors.push_back({{"name", key}, {"dtype", dtype}, {"shape", buffer.sizes().vec()}, {"nbytes", buffer.nbytes()}});
    message.buffers.push_back(std::move(buffer));
  }
  json non_tensors = json::object();
  for (const auto& key : batch.non_tensor_keys()) non_tensors[key] = batch.non_tensor(key);
  // Assigned one by one: a braced json initializer would copy every column again.
  json header = json::object();
  header["version"] = kWireVersion;
  header["batch_size"] = batch.has_size() ? json(batch.size()) : json(nullptr);
  header["tensors"] = std::move(tensors);
  header["non_tensors"] = std::move(non_tensors);
  header["meta_info"] = batch.meta_info();
  try {
    message.header = header.dump();
  } catch (const json::type_error& e) {
    throw ValueError(std::string("encode_batch: a non-tensor column or meta_info holds a string "
                                 "that is not valid UTF-8: ") +
                     e.what());
  }
  return message;
}

namespace {

json parse_header(std::string_view text) {
  const auto limit_depth = [](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth) {
      throw FormatError("wire header: JSON nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), limit_depth);
  } catch (const json::parse_error& e) {
    throw FormatError("wire header is not valid JSON (byte " + std::to_string(e.byte) + "): " + e.what());
  } catch (const json::exception& e) {  // out_of_range: a number too large for a double
    throw FormatError(std::string("wire header is not valid JSON: ") + e.what());
  }
}

void check_keys(const json& object, std::initializer_list<const char*> expected, const std::string& where) {
  for (const char* key : expected) {
    if (!object.contains(key)) throw FormatError("wire header: " + where + " lacks '" + key + "'");
  }
  if (object.size() != expected.size()) {
    for (const auto& item : object.items()) {
      bool known = false;
      for (const char* key : expected) known = known || item.key() == key;
      if (!known) {
        throw FormatError("wire header: " + where + " has unknown key '" + item.key() + "'");
      }
    }
  }
}

int64_t non_negative(const json& value, const std::string& what) {
  if (value.is_number_unsigned() && value.get<uint64_t>() <= kWireInt64Max) {
    return static_cast<int64_t>(value.get<uint64_t>());
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return value.get<int64_t>();
  throw FormatError("wire header: " + what + " must be an integer in [0, 2^63), got " + preview(value));
}

struct TensorSpec {
  std::string where;  // tensors[1] ("mask"), for messages
  std::string name;
  at::ScalarType dtype;
  std::vector<int64_t> shape;
  int64_t nbytes = 0;
};

// Rejects any shape whose strides would not fit in int64 (zero dims counted as
// one), so at::empty never sees a size it would overflow on.
int64_t checked_nbytes(const TensorSpec& spec) {
  uint64_t bound = c10::elementSize(spec.dtype);
  uint64_t elements = 1;
  for (int64_t dim : spec.shape) {
    const auto size = static_cast<uint64_t>(dim);
    if (__builtin_mul_overflow(bound, std::max<uint64_t>(size, 1), &bound) || bound > kWireInt64Max) {
      throw FormatError("wire header: " + spec.where + ": shape " + json(spec.shape).dump() + " overflows int64");
    }
    elements *= size;
  }
  return static_cast<int64_t>(elements * c10::elementSize(spec.dtype));
}

TensorSpec parse_tensor_spec(const json& entry, size_t index) {
  TensorSpec spec;
  spec.where = "tensors[" + std::to_string(index) + "]";
  if (!entry.is_object()) {
    throw FormatError("wire header: " + spec.where + " must be an object, got " + preview(entry));
  }
  check_keys(entry, {"name", "dtype", "shape", "nbytes"}, spec.where);
  const json& name = entry["name"];
  if (!name.is_string()) {
    throw FormatError("wire header: " + spec.where + ".name must be a string, got " + preview(name));
  }
  spec.name = name.get<std::string>();
  spec.where += " (" + preview(name) + ")";

  const json& dtype = entry["dtype"];
  const auto type = dtype.is_string() ? dtype_from_name(dtype.get<std::string>()) : std::nullopt;
  if (!type) {
    throw FormatError("wire header: " + spec.where + ": unknown dtype " + preview(dtype) +
                      "; known: " + known_dtypes());
  }
  spec.dtype = *type;

  const json& shape = entry["shape"];
  if (!shape.is_array() || shape.empty() || static_cast<int64_t>(shape.size()) > kMaxDims) {
    throw FormatError("wire header: " + spec.where + ": shape must be an array of 1 to " + std::to_string(kMaxDims) +
                      " sizes, got " + preview(shape));
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    spec.shape.push_back(non_negative(shape[d], spec.where + ".shape[" + std::to_string(d) + "]"));
  }
  spec.nbytes = non_negative(entry["nbytes"], spec.where + ".nbytes");
  const int64_t expected = checked_nbytes(spec);
  if (expected != spec.nbytes) {
    throw FormatError("wire header: " + spec.where + ": shape " + json(spec.shape).dump() + " of " +
                      dtype.get<std::string>() + " needs " + std::to_string(expected) + " bytes but nbytes is " +
                      std::to_string(spec.nbytes));
  }
  return spec;
}

// Any byte other than 0 or 1 in a bool tensor is undefined behaviour in ATen kernels.
void check_bool_bytes(const TensorSpec& spec, std::string_view frame) {
  for (size_t i = 0; i < frame.size(); ++i) {
    const auto byte = static_cast<unsigned char>(frame[i]);
    if (byte > 1) {
      throw FormatError("wire frame for " + spec.where + ": bool byte at offset " + std::to_string(i) + " is " +
                        std::to_string(byte) + ", not 0 or 1");
    }
  }
}

// `owner` null: the tensor gets its own copy of the frame.
at::Tensor tensor_from_frame(const TensorSpec& spec, std::string_view frame, const std::shared_ptr<void>& owner) {
  if (static_cast<uint64_t>(spec.nbytes) != frame.size()) {
    throw FormatError("wire frame for " + spec.where + " has " + std::to_string(frame.size()) +
                      " bytes but the header says " + std::to_string(spec.nbytes));
  }
  if (spec.dtype == at::kBool) check_bool_bytes(spec, frame);
  const auto address = reinterpret_cast<std::uintptr_t>(frame.data());
  if (owner && !frame.empty() && address % c10::elementSize(spec.dtype) == 0) {
    return at::from_blob(
        const_cast<char*>(frame.data()), spec.shape, [owner](void*) {}, at::TensorOptions().dtype(spec.dtype));
  }
  at::Tensor tensor = at::empty(spec.shape, at::TensorOptions().dtype(spec.dtype));
  if (!frame.empty()) std::memcpy(tensor.data_ptr(), frame.data(), frame.size());
  return tensor;
}

}  // namespace

Batch decode_batch(std::string_view header_text, const std::vector<std::string_view>& frames) {
  return decode_batch(header_text, frames, nullptr);
}

Batch decode_batch(std::string_view header_text, const std::vector<std::string_view>& frames,
                   std::shared_ptr<void> owner) {
  json header = parse_header(header_text);
  if (!header.is_object()) {
    throw FormatError("wire header must be a JSON object, got " + preview(header));
  }
  check_keys(header, {"version", "batch_size", "tensors", "non_tensors", "meta_info"}, "header");
  const json& version = header["version"];
  if (!version.is_number_integer() || version != kWireVersion) {
    throw FormatError("wire header: unsupported version " + preview(version) + " (this build reads " +
                      std::to_string(kWireVersion) + ")");
  }
  const json& tensors = header["tensors"];
  json& non_tensors = header["non_tensors"];
  json& meta_info = header["meta_info"];
  if (!tensors.is_array()) {
    throw FormatError("wire header: 'tensors' must be an array, got " + preview(tensors));
  }
  if (!non_tensors.is_object()) {
    throw FormatError("wire header: 'non_tensors' must be an object, got " + preview(non_tensors));
  }
  if (!meta_info.is_object()) {
    throw FormatError("wire header: 'meta_info' must be an object, got " + preview(meta_info));
  }
  if (tensors.size() != frames.size()) {
    throw FormatError("wire header lists " + std::to_string(tensors.size()) + " tensors but " +
                      std::to_string(frames.size()) + " frames arrived");
  }
  const json& batch_size_value = header["batch_size"];
  if (batch_size_value.is_null()) {
    if (!tensors.empty() || !non_tensors.empty()) {
      throw FormatError("wire header: batch_size is null but the batch has columns");
    }
    Batch batch;
    batch.meta_info() = std::move(meta_info);
    return batch;
  }
  const int64_t batch_size = non_negative(batch_size_value, "batch_size");

  Batch batch(batch_size);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorSpec spec = parse_tensor_spec(tensors[i], i);
    if (batch.contains(spec.name)) {
      throw FormatError("wire header: " + spec.where + " repeats an earlier tensor name");
    }
    if (spec.shape[0] != batch_size) {
      throw FormatError("wire header: " + spec.where + " has " + std::to_string(spec.shape[0]) +
                        " rows but batch_size is " + std::to_string(batch_size));
    }
    batch.set(spec.name, tensor_from_frame(spec, frames[i], owner));
  }
  for (auto& [key, rows] : non_tensors.items()) {
    const std::string where = "non_tensors['" + key + "']";
    if (batch.contains(key)) {
      throw FormatError("wire header: " + where + " reuses the name of a tensor column");
    }
    if (!rows.is_array()) {
      throw FormatError("wire header: " + where + " must be an array, got " + preview(rows));
    }
    if (static_cast<int64_t>(rows.size()) != batch_size) {
      throw FormatError("wire header: " + where + " has " + std::to_string(rows.size()) + " rows but batch_size is " +
                        std::to_string(batch_size));
    }
    batch.set_non_tensor(key, std::move(rows.get_ref<json::array_t&>()));
  }
  batch.meta_info() = std::move(meta_info);
  return batch;
}

Batch decode_batch(const WireView& message) { return decode_batch(message.header, message.frames); }

WireView view_of(const WireMessage& message) {
  WireView view{message.header, {}};
  for (size_t i = 0; i < message.buffers.size(); ++i) {
    view.frames.push_back(bytes_of(message.buffers[i], i, "view_of"));
  }
  return view;
}

namespace {

void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t get_le(std::string_view in, size_t offset, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(in[offset + i])) << (8 * i);
  }
  return value;
}

}  // namespace

std::string pack(const WireMessage& message) {
  const WireView view = view_of(message);
  size_t total = kPreambleBytes + 8 * view.frames.size() + view.header.size();
  for (const auto& frame : view.frames) total += frame.size();
  std::string out;
  out.reserve(total);
  out.append(kMagic, sizeof(kMagic));
  put_le(out, kPackVersion, 4);
  put_le(out, view.header.size(), 8);
  put_le(out, view.frames.size(), 8);
  for (const auto& frame : view.frames) put_le(out, frame.size(), 8);
  out.append(view.header);
  for (const auto& frame : view.frames) out.append(frame);
  return out;
}

WireView unpack(std::string_view packed) {
  const size_t size = packed.size();
  if (size < kPreambleBytes) {
    throw FormatError("packed batch: " + std::to_string(size) + " bytes is shorter than the " +
                      std::to_string(kPreambleBytes) + "-byte preamble");
  }
  if (packed.substr(0, sizeof(kMagic)) != std::string_view(kMagic, sizeof(kMagic))) {
    throw FormatError("packed batch: bad magic at byte 0 (expected \"RLCB\")");
  }
  const uint64_t version = get_le(packed, 4, 4);
  if (version != kPackVersion) {
    throw FormatError("packed batch: unsupported version " + std::to_string(version) + " at byte 4 (this build reads " +
                      std::to_string(kPackVersion) + ")");
  }
  const uint64_t header_bytes = get_le(packed, 8, 8);
  const uint64_t frame_count = get_le(packed, 16, 8);
  size_t offset = kPreambleBytes;
  // Compare against what is left rather than computing offset + length, which could wrap.
  if (frame_count > (size - offset) / 8) {
    throw FormatError("packed batch: frame count " + std::to_string(frame_count) +
                      " at byte 16 needs more length fields than the " + std::to_string(size - offset) + " bytes left");
  }
  const size_t lengths_at = offset;
  offset += 8 * frame_count;
  if (header_bytes > size - offset) {
    throw FormatError("packed batch: header length " + std::to_string(header_bytes) + " at byte 8 exceeds the " +
                      std::to_string(size - offset) + " bytes left at byte " + std::to_string(offset));
  }
  WireView view{packed.substr(offset, header_bytes), {}};
  offset += header_bytes;
  view.frames.reserve(frame_count);
  for (uint64_t i = 0; i < frame_count; ++i) {
    const size_t field = lengths_at + 8 * i;
    const uint64_t frame_bytes = get_le(packed, field, 8);
    if (frame_bytes > size - offset) {
      throw FormatError("packed batch: frame " + std::to_string(i) + " length " + std::to_string(frame_bytes) +
                        " at byte " + std::to_string(field) + " exceeds the " + std::to_string(size - offset) +
                        " bytes left at byte " + std::to_string(offset));
    }
    view.frames.push_back(packed.substr(offset, frame_bytes));
    offset += frame_bytes;
  }
  if (offset != size) {
    throw FormatError("packed batch: " + std::to_string(size - offset) +
                      " trailing bytes after the last frame at byte " + std::to_string(offset));
  }
  return view;
}

}  // namespace rlcore
