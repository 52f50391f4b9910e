// UTF-8 stepping with Unicode's maximal-subpart rule for ill-formed input.
#include "utf8.h"

#include <cstdint>

namespace rlcore::utf8 {
namespace {

struct LeadByte {
  std::size_t length;       // 0: never starts a character
  std::uint8_t second_min;  // the second byte's range excludes overlongs
  std::uint8_t second_max;  // and surrogates (ED A0..BF) and > U+10FFFF
};

LeadByte lead_byte(std::uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

Step step(std::string_view text, std::size_t pos) {
  const auto b0 = static_cast<std::uint8_t>(text[pos]);
  const LeadByte lead = lead_byte(b0);
  if (lead.length == 1) return {1, true, b0};
  if (lead.length == 0) return {1, false, 0};
  char32_t cp = b0 & (0xFF >> (lead.length + 1));
  for (std::size_t i = 1; i < lead.length; ++i) {
    if (pos + i >= text.size()) return {i, false, 0};
    const auto b = static_cast<std::uint8_t>(text[pos + i]);
    const std::uint8_t lo = i == 1 ? lead.second_min : 0x80;
    const std::uint8_t hi = i == 1 ? lead.second_max : 0xBF;
    if (b < lo || b > hi) return {i, false, 0};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {lead.length, true, cp};
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string replace_invalid(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t pos = 0; pos < bytes.size();) {
    const Step s = step(bytes, pos);
    if (s.valid) {
      out.append(bytes.substr(pos, s.length));
    } else {
      out.append("\xEF\xBF\xBD");
    }
    pos += s.length;
  }
  return out;
}

bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace rlcore::utf8
