// Python `str` operations over UTF-8 bytes, so the graders can follow verl's
// Python code step by step (lengths and indices count code points, as Python does).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace rlcore::reward {

// str.replace(old, new): left to right, non-overlapping, replaced text is not rescanned.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);

// str.split(sep) with an explicit, non-empty separator: empty pieces are kept.
std::vector<std::string_view> split(std::string_view text, std::string_view sep);

bool contains(std::string_view text, std::string_view needle);
bool starts_with(std::string_view text, std::string_view prefix);

// Trims " \t\n\v\f\r" from both ends.
std::string_view trim_ascii_whitespace(std::string_view text);

// Size in bytes of the character at `pos` (which must be < text.size()). Python
// never sees invalid UTF-8 (decoding replaces it), so a byte that does not start
// a complete, well-formed sequence simply counts as one character.
std::size_t utf8_char_size(std::string_view text, std::size_t pos);

// len(text) in code points.
std::size_t utf8_length(std::string_view text);

// text[-max_chars:] in code points.
std::string_view utf8_suffix(std::string_view text, std::size_t max_chars);

}  // namespace rlcore::reward
