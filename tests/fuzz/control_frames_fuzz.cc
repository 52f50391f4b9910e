// The control plane's wire frames: the first byte picks what the rest is:
// frame 0 (the JSON header, under the server's limits), or a packed Batch
// (its header and tensor frames) as a reply carries it.
#include "fuzz_input.h"
#include "rlcore/core/runtime/control_message.h"
#include "rlcore/wire_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest = rlcore_fuzz::as_text(data + 1, size - 1);
  if (data[0] % 2 == 0) {
    rlcore::runtime::MessageLimits limits;
    limits.max_header_bytes = 1 << 16;  // small, so the limit itself is reached
    rlcore_fuzz::expect_only_rlcore_errors("control header", [&] {
      const nlohmann::json header = rlcore::runtime::parse_control_header(rest, limits);
      // The server reads a peer's identity from a validated hello only.
      if (header["type"] == "hello") (void)rlcore::runtime::peer_info_from_json(header);
    });
  } else {
    rlcore_fuzz::expect_only_rlcore_errors("batch frames", [&] {
      const rlcore::Batch batch = rlcore::decode_batch(rlcore::unpack(rest));
      for (const auto& name : batch.tensor_keys()) (void)batch.tensor(name).sum();
      for (const auto& name : batch.non_tensor_keys()) (void)batch.non_tensor(name).size();
    });
  }
  return 0;
}
