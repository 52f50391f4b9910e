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

  // One piece of a text cut at the matches: a match or the gap before one.
  struct Match {
    std::size_t begin;
    std::size_t end;
    bool is_match;
  };

  // Appends HF's Pattern::find_matches of `text`: the matches, as Oniguruma's
  // find_iter gives them (an empty match counts, except right where the
  // previous match ended), with the gaps between them, so together they cover
  // `text` in order. An empty `text` gives one empty gap. Invalid UTF-8 never
  // matches, so it lands in the gaps.
  void find_matches(std::string_view text, std::vector<Match>& out) const;

  // Appends the matches and the gaps between them, in order (HF's "Isolated"
  // behaviour); empty pieces are left out, so an empty match only cuts.
  void split_isolated(std::string_view text, std::vector<std::string_view>& out) const;

  bool matches_whole(std::string_view text) const;

 private:
  bool find(std::string_view text, std::size_t start, unsigned options, pcre2_real_match_data_8* match_data,
            std::size_t& begin, std::size_t& end) const;

  // Calls on_piece(begin, end, is_match) for what find_matches gives.
  template <typename OnPiece>
  void for_each_piece(std::string_view text, OnPiece&& on_piece) const;

  pcre2_real_code_8* code_ = nullptr;
  std::string field_;
  std::string literal_;  // a non-empty literal pattern, searched without PCRE2
};

}  // namespace rlcore
