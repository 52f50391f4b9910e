// PCRE2 glue for the tokenizer's regexes. PCRE2_MATCH_INVALID_UTF lets the
// subject hold any bytes: invalid sequences simply never match.
#include "regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>

#include "rlcore/error.h"
#include "utf8.h"

namespace rlcore {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0) {
    return "PCRE2 error " + std::to_string(code);
  }
  return reinterpret_cast<const char*>(buffer);
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* md) const { pcre2_match_data_free(md); }
};
using MatchData = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;

// Only the whole match is read, so one ovector pair suffices for any pattern.
MatchData make_match_data() {
  MatchData md(pcre2_match_data_create(1, nullptr));
  if (!md) throw std::bad_alloc();
  return md;
}

}  // namespace

Regex::Regex(const std::string& pattern, bool literal, std::string field)
    : field_(std::move(field)), literal_(literal ? pattern : std::string()) {
  uint32_t options = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
  // PCRE2 refuses UCP with LITERAL, and a literal has no classes for it to affect.
  options |= literal ? PCRE2_LITERAL : PCRE2_UCP;
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error, &error_offset,
                        nullptr);
  if (code_ == nullptr) {
    throw FormatError(field_ + ": pattern does not compile at offset " + std::to_string(error_offset) + ": " +
                      pcre2_message(error));
  }
  // Without JIT (unsupported platform or build) the interpreter gives the same matches.
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() { pcre2_code_free(code_); }

bool Regex::find(std::string_view text, std::size_t start, unsigned options, pcre2_match_data* match_data,
                 std::size_t& begin, std::size_t& end) const {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = pcre2_match(code_, subject, text.size(), start, options, match_data, nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    // The interpreter keeps its backtracking state on the heap, so it copes
    // with inputs that overflow the JIT's fixed stack.
    rc = pcre2_match(code_, subject, text.size(), start, options | PCRE2_NO_JIT, match_data, nullptr);
  }
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    throw ValueError(field_ + ": matching failed on a " + std::to_string(text.size()) +
                     "-byte input: " + pcre2_message(rc));
  }
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
  begin = ovector[0];
  end = ovector[1];
  return true;
}

template <typename OnPiece>
void Regex::for_each_piece(std::string_view text, OnPiece&& on_piece) const {
  std::size_t gap_start = 0;
  if (!literal_.empty()) {
    // A literal that is not empty never matches empty: its leftmost
    // non-overlapping occurrences are what a regex search finds.
    for (std::size_t at = text.find(literal_); at != std::string_view::npos; at = text.find(literal_, gap_start)) {
      if (at > gap_start) on_piece(gap_start, at, false);
      gap_start = at + literal_.size();
      on_piece(at, gap_start, true);
    }
    if (gap_start < text.size()) on_piece(gap_start, text.size(), false);
    return;
  }
  MatchData md = make_match_data();
  std::size_t search_from = 0;
  bool matched_before = false;
  std::size_t last_match_end = 0;
  std::size_t begin = 0;
  std::size_t end = 0;
  while (search_from <= text.size() && find(text, search_from, 0, md.get(), begin, end)) {
    if (begin == end && matched_before && last_match_end == end) {
      // The onig crate's rule against looping: step one character and retry.
      search_from += search_from < text.size() ? utf8::step(text, search_from).length : 1;
      continue;
    }
    if (begin > gap_start) on_piece(gap_start, begin, false);
    on_piece(begin, end, true);
    gap_start = search_from = last_match_end = end;
    matched_before = true;
  }
  if (gap_start < text.size()) on_piece(gap_start, text.size(), false);
}

void Regex::find_matches(std::string_view text, std::vector<Match>& out) const {
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  for_each_piece(text, [&](std::size_t begin, std::size_t end, bool is_match) {
    out.push_back({begin, end, is_match});
  });
}

void Regex::split_isolated(std::string_view text, std::vector<std::string_view>& out) const {
  for_each_piece(text, [&](std::size_t begin, std::size_t end, bool) {
    if (end > begin) out.push_back(text.substr(begin, end - begin));
  });
}

bool Regex::matches_whole(std::string_view text) const {
  MatchData md = make_match_data();
  std::size_t begin = 0;
  std::size_t end = 0;
  return find(text, 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, md.get(), begin, end);
}

}  // namespace rlcore
