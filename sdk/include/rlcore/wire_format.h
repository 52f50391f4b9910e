// Wire format of a Batch: one JSON header plus one raw buffer per tensor, so a
// transport (ZeroMQ multipart) can send tensor memory without copying it.
//
// Header (UTF-8 JSON object, exactly these keys):
//   {"version": 1, "batch_size": <int >= 0 | null>,
//    "tensors": [{"name": str, "dtype": "float32", "shape": [int...], "nbytes": int}...],
//    "non_tensors": {name: [one JSON value per row]}, "meta_info": {...}}
// Frame i holds tensors[i] as C-contiguous little-endian bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/batch.h"
#include "rlcore/export.h"

namespace rlcore {

inline constexpr int kWireVersion = 1;

// What a sender sends. Each buffer is a contiguous CPU tensor: send
// data_ptr()/nbytes() as a frame. A buffer may share memory with the encoded
// Batch, so do not modify those tensors until the send has completed.
struct RLCORE_API WireMessage {
  std::string header;
  std::vector<at::Tensor> buffers;
};

// What a receiver holds: views into memory it owns (received frames, a file).
struct RLCORE_API WireView {
  std::string_view header;
  std::vector<std::string_view> frames;
};

// Non-CPU tensors are copied to CPU, non-contiguous ones made contiguous.
// ValueError for a dtype or layout the wire format cannot carry, or JSON that is
// not valid UTF-8.
RLCORE_API WireMessage encode_batch(const Batch& batch);

// Validates everything and copies every frame, so the result owns its memory and
// the frames may be freed afterwards. Malformed input throws FormatError.
RLCORE_API Batch decode_batch(std::string_view header, const std::vector<std::string_view>& frames);
RLCORE_API Batch decode_batch(const WireView& message);
// The same checks, but tensors alias the frames instead of copying them (a
// frame whose address is not aligned for its dtype is copied). Every aliasing
// tensor holds a reference to `owner`, which must keep the frames alive.
RLCORE_API Batch decode_batch(std::string_view header, const std::vector<std::string_view>& frames,
                              std::shared_ptr<void> owner);

// Views of a message's header and buffers; valid while the message lives.
RLCORE_API WireView view_of(const WireMessage& message);

// One-buffer framing for files and tests. Little-endian:
//   "RLCB" | u32 version | u64 header bytes | u64 frame count | u64 bytes per frame...
//   | header | frames...
RLCORE_API std::string pack(const WireMessage& message);
// Views into `packed`; FormatError on a bad magic, version, length or trailing bytes.
RLCORE_API WireView unpack(std::string_view packed);

}  // namespace rlcore
