// Python's str predicates over code points (see python_unicode.h).
#include "python_unicode.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "python_str.h"
#include "python_unicode_tables.h"

namespace rlcore::reward {
namespace {

// [first, last] ranges where Python 3.11's str.isdigit() is true (generated with
// `[c for c in range(0x110000) if chr(c).isdigit()]`, ranges merged).
constexpr std::pair<char32_t, char32_t> kDigitRanges[] = {
    {0x30, 0x39},       {0xB2, 0xB3},       {0xB9, 0xB9},       {0x660, 0x669},     {0x6F0, 0x6F9},
    {0x7C0, 0x7C9},     {0x966, 0x96F},     {0x9E6, 0x9EF},     {0xA66, 0xA6F},     {0xAE6, 0xAEF},
    {0xB66, 0xB6F},     {0xBE6, 0xBEF},     {0xC66, 0xC6F},     {0xCE6, 0xCEF},     {0xD66, 0xD6F},
    {0xDE6, 0xDEF},     {0xE50, 0xE59},     {0xED0, 0xED9},     {0xF20, 0xF29},     {0x1040, 0x1049},
    {0x1090, 0x1099},   {0x1369, 0x1371},   {0x17E0, 0x17E9},   {0x1810, 0x1819},   {0x1946, 0x194F},
    {0x19D0, 0x19DA},   {0x1A80, 0x1A89},   {0x1A90, 0x1A99},   {0x1B50, 0x1B59},   {0x1BB0, 0x1BB9},
    {0x1C40, 0x1C49},   {0x1C50, 0x1C59},   {0x2070, 0x2070},   {0x2074, 0x2079},   {0x2080, 0x2089},
    {0x2460, 0x2468},   {0x2474, 0x247C},   {0x2488, 0x2490},   {0x24EA, 0x24EA},   {0x24F5, 0x24FD},
    {0x24FF, 0x24FF},   {0x2776, 0x277E},   {0x2780, 0x2788},   {0x278A, 0x2792},   {0xA620, 0xA629},
    {0xA8D0, 0xA8D9},   {0xA900, 0xA909},   {0xA9D0, 0xA9D9},   {0xA9F0, 0xA9F9},   {0xAA50, 0xAA59},
    {0xABF0, 0xABF9},   {0xFF10, 0xFF19},   {0x104A0, 0x104A9}, {0x10A40, 0x10A43}, {0x10D30, 0x10D39},
    {0x10E60, 0x10E68}, {0x11052, 0x1105A}, {0x11066, 0x1106F}, {0x110F0, 0x110F9}, {0x11136, 0x1113F},
    {0x111D0, 0x111D9}, {0x112F0, 0x112F9}, {0x11450, 0x11459}, {0x114D0, 0x114D9}, {0x11650, 0x11659},
    {0x116C0, 0x116C9}, {0x11730, 0x11739}, {0x118E0, 0x118E9}, {0x11950, 0x11959}, {0x11C50, 0x11C59},
    {0x11D50, 0x11D59}, {0x11DA0, 0x11DA9}, {0x16A60, 0x16A69}, {0x16AC0, 0x16AC9}, {0x16B50, 0x16B59},
    {0x1D7CE, 0x1D7FF}, {0x1E140, 0x1E149}, {0x1E2F0, 0x1E2F9}, {0x1E950, 0x1E959}, {0x1F100, 0x1F10A},
    {0x1FBF0, 0x1FBF9},
};

// str.isalpha() stand-in for the Final_Sigma context: letters are alnum and not digits.
bool is_letter(char32_t c) { return python_isalnum(c) && !python_isdigit(c); }

char32_t lower_char(char32_t c) {
  const tables::LowerRun* begin = tables::kLowerRuns;
  const tables::LowerRun* end = begin + tables::kLowerRunCount;
  const auto* it =
      std::upper_bound(begin, end, c, [](char32_t value, const tables::LowerRun& run) { return value < run.first; });
  if (it == begin) return c;
  const tables::LowerRun& run = *std::prev(it);
  if (c > run.last || (c - run.first) % run.stride != 0) return c;
  return static_cast<char32_t>(static_cast<int64_t>(c) + run.delta);
}

}  // namespace

char32_t decode_utf8(std::string_view text, std::size_t pos, std::size_t* size) {
  const std::size_t n = utf8_char_size(text, pos);
  *size = n;
  const auto byte = [&](std::size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(text[pos + i])); };
  const char32_t lead = byte(0);
  if (n == 1) return lead < 0x80 ? lead : U'\uFFFD';
  char32_t c = n == 2 ? lead & 0x1F : n == 3 ? lead & 0x0F : lead & 0x07;
  for (std::size_t i = 1; i < n; ++i) c = (c << 6) | (byte(i) & 0x3F);
  return c;
}

bool python_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool python_isdigit(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const auto* end = std::end(kDigitRanges);
  const auto* it = std::upper_bound(std::begin(kDigitRanges), end, c,
                                    [](char32_t value, const auto& range) { return value < range.first; });
  return it != std::begin(kDigitRanges) && c <= std::prev(it)->second;
}

bool python_str_isdigit(std::string_view text) {
  if (text.empty()) return false;
  std::size_t size = 0;
  for (std::size_t pos = 0; pos < text.size(); pos += size) {
    if (!python_isdigit(decode_utf8(text, pos, &size))) return false;
  }
  return true;
}

bool python_str_any_digit(std::string_view text) {
  std::size_t size = 0;
  for (std::size_t pos = 0; pos < text.size(); pos += size) {
    if (python_isdigit(decode_utf8(text, pos, &size))) return true;
  }
  return false;
}

std::string_view python_strip(std::string_view text) {
  std::size_t begin = 0;
  std::size_t size = 0;
  while (begin < text.size() && python_isspace(decode_utf8(text, begin, &size))) begin += size;
  std::size_t end = begin;
  for (std::size_t pos = begin; pos < text.size(); pos += size) {
    if (!python_isspace(decode_utf8(text, pos, &size))) end = pos + size;
  }
  return text.substr(begin, end - begin);
}

bool python_isalnum(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  const auto* begin = tables::kAlnumRanges;
  const auto* end = begin + tables::kAlnumRangeCount;
  const auto* it =
      std::upper_bound(begin, end, c, [](char32_t value, const auto& range) { return value < range.first; });
  return it != begin && c <= std::prev(it)->second;
}

void append_utf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c);
    return;
  }
  static constexpr unsigned char kLeadBits[] = {0, 0xC0, 0xE0, 0xF0};
  const int continuation_bytes = c < 0x800 ? 1 : c < 0x10000 ? 2 : 3;
  out += static_cast<char>(kLeadBits[continuation_bytes] | (c >> (6 * continuation_bytes)));
  for (int i = continuation_bytes - 1; i >= 0; --i) out += static_cast<char>(0x80 | ((c >> (6 * i)) & 0x3F));
}

std::string python_lower(std::string_view text) {
  constexpr char32_t kCapitalSigma = 0x3A3, kSmallSigma = 0x3C3, kFinalSigma = 0x3C2;
  std::string out;
  out.reserve(text.size());
  std::size_t size = 0;
  char32_t previous = 0;
  for (std::size_t pos = 0; pos < text.size(); pos += size) {
    const char32_t c = decode_utf8(text, pos, &size);
    if (c < 0x80) {
      out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    } else if (c == 0x130) {  // İ lowers to i + combining dot above
      append_utf8(U'i', out);
      append_utf8(0x307, out);
    } else if (c == kCapitalSigma) {
      std::size_t next_size = 0;
      const bool letter_follows = pos + size < text.size() && is_letter(decode_utf8(text, pos + size, &next_size));
      append_utf8(is_letter(previous) && !letter_follows ? kFinalSigma : kSmallSigma, out);
    } else {
      append_utf8(lower_char(c), out);
    }
    previous = c;
  }
  return out;
}

}  // namespace rlcore::reward
