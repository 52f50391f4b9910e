// PCRE2 glue for the tokenizer's regexes. PCRE2_MATCH_INVALID_UTF lets the
// subject hold any bytes: invalid sequences simply never match.
#include "tokenizer_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>

#include "rlcore/error.h"
#include "tokenizer_utf8.h"

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
    : field_(std::move(field)) {
  uint32_t options = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
  // PCRE2 refuses UCP with LITERAL, and a literal has no classes for it to affect.
  options |= literal ? PCRE2_LITERAL : PCRE2_UCP;
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                        &error, &error_offset, nullptr);
  if (code_ == nullptr) {
    throw FormatError(field_ + ": pattern does not compile at offset " +
                      std::to_string(error_offset) + ": " + pcre2_message(error));
  }
  // Without JIT (unsupported platform or build) the interpreter gives the same matches.
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() { pcre2_code_free(code_); }

bool Regex::find(std::string_view text, std::size_t start, unsigned options,
                 pcre2_match_data* match_data, std::size_t& begin, std::size_t& end) const {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = pcre2_match(code_, subject, text.size(), start, options, match_data, nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
    // The interpreter keeps its backtracking state on the heap, so it copes
    // with inputs that overflow the JIT's fixed stack.
    rc = pcre2_match(code_, subject, text.size(), start, options | PCRE2_NO_JIT, match_data,
                     nullptr);
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

void Regex::split_isolated(std::string_view text, std::vector<std::string_view>& out) const {
  MatchData md = make_match_data();
  std::size_t piece_start = 0;
  std::size_t search_from = 0;
  std::size_t begin = 0;
  std::size_t end = 0;
  while (search_from < text.size() && find(text, search_from, 0, md.get(), begin, end)) {
    if (begin == end) {
      // An empty match cuts nothing; step over one character and look again.
      if (end >= text.size()) break;
      search_from = end + utf8::step(text, end).length;
      continue;
    }
    if (begin > piece_start) out.push_back(text.substr(piece_start, begin - piece_start));
    out.push_back(text.substr(begin, end - begin));
    piece_start = search_from = end;
  }
  if (piece_start < text.size()) out.push_back(text.substr(piece_start));
}

bool Regex::matches_whole(std::string_view text) const {
  MatchData md = make_match_data();
  std::size_t begin = 0;
  std::size_t end = 0;
  return find(text, 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, md.get(), begin, end);
}

}  // namespace rlcore
