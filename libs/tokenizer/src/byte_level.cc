// GPT-2's bytes_to_unicode, built once into two immutable lookup tables.
#include "byte_level.h"

#include <array>

#include "utf8.h"

namespace rlcore::byte_level {
namespace {

// The largest character the table uses: 256 + the 68 bytes that are not printable.
constexpr char32_t kMaxChar = 0x143;

struct Tables {
  std::array<std::string, 256> utf8;
  std::array<std::uint8_t, kMaxChar + 1> byte_of{};
  std::array<bool, kMaxChar + 1> is_byte_char{};

  Tables() {
    char32_t next_unprintable = 256;
    for (int b = 0; b < 256; ++b) {
      // Printable Latin-1 stays itself; the rest is shifted past U+00FF in byte order.
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t c = printable ? static_cast<char32_t>(b) : next_unprintable++;
      utf8::append(utf8[b], c);
      byte_of[c] = static_cast<std::uint8_t>(b);
      is_byte_char[c] = true;
    }
  }
};

const Tables& tables() {
  static const Tables kTables;
  return kTables;
}

}  // namespace

const std::string& byte_to_utf8(std::uint8_t b) { return tables().utf8[b]; }

std::string encode(std::string_view bytes) {
  const Tables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.utf8[static_cast<std::uint8_t>(c)];
  return out;
}

bool decode(std::string_view token, std::string& out) {
  const Tables& t = tables();
  const std::size_t original_size = out.size();
  for (std::size_t pos = 0; pos < token.size();) {
    const utf8::Step s = utf8::step(token, pos);
    if (!s.valid || s.code_point > kMaxChar || !t.is_byte_char[s.code_point]) {
      out.resize(original_size);
      return false;
    }
    out.push_back(static_cast<char>(t.byte_of[s.code_point]));
    pos += s.length;
  }
  return true;
}

}  // namespace rlcore::byte_level
