// Python's str predicates over code points (str.isspace, str.isdigit, str.strip),
// so graders that port verl's Python agree with it beyond ASCII.
#pragma once

#include <cstddef>
#include <string>
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

// str.isalnum() of one character; with '_' it is what `\w` matches in a str regex.
bool python_isalnum(char32_t c);

// text.lower(): Python's lowercase mapping of every character (U+0130 included).
// Python lowers a capital sigma to final ς by Unicode's Final_Sigma context; here
// it does so when a letter precedes it and none follows, which agrees for words
// of letters (it differs only around combining marks and other case-ignorables).
std::string python_lower(std::string_view text);

// The UTF-8 bytes of `c`, appended to `out`.
void append_utf8(char32_t c, std::string& out);

}  // namespace rlcore::reward
