// UTF-8 stepping that tolerates invalid bytes, for a tokenizer that must take
// any bytes and give them back exactly.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace rlcore::utf8 {

// One step through a byte string: a well-formed character, or the maximal
// ill-formed subsequence (Unicode's "maximal subpart") starting there.
struct Step {
  std::size_t length = 0;  // always >= 1
  bool valid = false;
  char32_t code_point = 0;  // meaningful only when valid
};

// `pos` must be < text.size().
Step step(std::string_view text, std::size_t pos);

void append(std::string& out, char32_t code_point);

// Each ill-formed subsequence becomes one U+FFFD, as Rust's
// String::from_utf8_lossy (and so HF's decode) does it.
std::string replace_invalid(std::string_view bytes);

// Unicode White_Space, which Rust's char::is_whitespace (HF's lstrip/rstrip) uses.
bool is_whitespace(char32_t code_point);

}  // namespace rlcore::utf8
