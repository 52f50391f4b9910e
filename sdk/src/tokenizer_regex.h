// A PCRE2 pattern compiled the way tokenizer regexes need: UTF with Unicode
// properties, JIT when available, and subjects that may hold invalid UTF-8.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;
struct pcre2_real_match_data_8;

namespace rlcore {

// Immutable after construction; matching from many threads at once is safe.
class Regex {
 public:
  // `field` names where the pattern came from (e.g. "pre_tokenizer.pattern.Regex")
  // for the FormatError thrown when it does not compile. A `literal` pattern
  // matches its text as it is.
  Regex(const std::string& pattern, bool literal, std::string field);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the matches and the gaps between them, in order, so together they
  // cover `text` (HF's "Isolated" behaviour); empty pieces are left out.
  // Invalid UTF-8 never matches, so it lands in the gaps.
  void split_isolated(std::string_view text, std::vector<std::string_view>& out) const;

  bool matches_whole(std::string_view text) const;

 private:
  bool find(std::string_view text, std::size_t start, unsigned options,
            pcre2_real_match_data_8* match_data, std::size_t& begin, std::size_t& end) const;

  pcre2_real_code_8* code_ = nullptr;
  std::string field_;
};

}  // namespace rlcore
