// Python's str predicates over code points (str.isspace, str.isdigit, str.strip),
// so graders that port verl's Python agree with it beyond ASCII.
#pragma once

#include <cstddef>
#include <string_view>

namespace rlcore::reward {

// The code point at `pos` (< text.size()) and its size in bytes; a byte that
// does not start a well-formed sequence decodes as U+FFFD, as Python's
// errors="replace" decoding would.
char32_t decode_utf8(std::string_view text, std::size_t pos, std::size_t* size);

// str.isspace() of one character (also what `\s` matches in a str regex).
bool python_isspace(char32_t c);

// str.isdigit() of one character: Unicode Numeric_Type Digit or Decimal
// (superscripts, Arabic-Indic digits, ...); Python 3.11's Unicode 14 tables.
bool python_isdigit(char32_t c);

// text.isdigit(): non-empty and every character a digit.
bool python_str_isdigit(std::string_view text);

// any(c.isdigit() for c in text)
bool python_str_any_digit(std::string_view text);

// text.strip() with no argument: Unicode whitespace from both ends.
std::string_view python_strip(std::string_view text);

}  // namespace rlcore::reward
