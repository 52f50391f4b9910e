// GPT-2's byte-to-unicode table: every byte gets a printable character, so BPE
// can treat any byte string as text and the decoder can map it back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rlcore::byte_level {

// The character byte `b` stands for, UTF-8 encoded ("Ġ" for a space).
const std::string& byte_to_utf8(std::uint8_t b);

std::string encode(std::string_view bytes);

// Appends the bytes a byte-level string stands for; false (and `out` as it was)
// when some character is not one of the 256 byte characters.
bool decode(std::string_view token, std::string& out);

}  // namespace rlcore::byte_level
