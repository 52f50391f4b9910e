// Python `str` operations over UTF-8 bytes (see python_str.h).
#include "python_str.h"

namespace rlcore::reward {
namespace {

bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

std::size_t sequence_size(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

}  // namespace

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  std::size_t start = 0;
  for (std::size_t hit; (hit = text.find(from, start)) != std::string_view::npos; start = hit + from.size()) {
    out.append(text, start, hit - start);
    out.append(to);
  }
  out.append(text, start);
  return out;
}

std::vector<std::string_view> split(std::string_view text, std::string_view sep) {
  std::vector<std::string_view> pieces;
  std::size_t start = 0;
  for (std::size_t hit; (hit = text.find(sep, start)) != std::string_view::npos; start = hit + sep.size()) {
    pieces.push_back(text.substr(start, hit - start));
  }
  pieces.push_back(text.substr(start));
  return pieces;
}

bool contains(std::string_view text, std::string_view needle) { return text.find(needle) != std::string_view::npos; }

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

std::string_view trim_ascii_whitespace(std::string_view text) {
  constexpr std::string_view kWhitespace = " \t\n\v\f\r";
  const std::size_t first = text.find_first_not_of(kWhitespace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kWhitespace) - first + 1);
}

std::size_t utf8_char_size(std::string_view text, std::size_t pos) {
  const std::size_t size = sequence_size(static_cast<unsigned char>(text[pos]));
  if (size > text.size() - pos) return 1;
  for (std::size_t i = 1; i < size; ++i) {
    if (!is_continuation(static_cast<unsigned char>(text[pos + i]))) return 1;
  }
  return size;
}

std::size_t utf8_length(std::string_view text) {
  std::size_t chars = 0;
  for (std::size_t pos = 0; pos < text.size(); pos += utf8_char_size(text, pos)) ++chars;
  return chars;
}

std::string_view utf8_suffix(std::string_view text, std::size_t max_chars) {
  // Walks backwards so clipping a 1 MB response costs only the kept tail.
  std::size_t pos = text.size();
  for (std::size_t chars = 0; pos > 0 && chars < max_chars; ++chars) {
    std::size_t start = pos - 1;
    while (start > 0 && pos - start < 4 && is_continuation(static_cast<unsigned char>(text[start]))) {
      --start;
    }
    if (utf8_char_size(text, start) != pos - start) start = pos - 1;
    pos = start;
  }
  return text.substr(pos);
}

}  // namespace rlcore::reward
