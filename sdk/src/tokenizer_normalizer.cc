// NFC by the book (UAX #15): full canonical decomposition, canonical ordering,
// then canonical composition, over the generated Unicode tables.
#include "tokenizer_normalizer.h"

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "tokenizer_unicode_tables.h"
#include "tokenizer_utf8.h"

namespace rlcore {
namespace {

// Below U+0300 every character is its own NFC and never composes with what
// follows, so text made only of such characters is already normalized.
constexpr char32_t kFirstUnstable = 0x300;
constexpr unsigned char kFirstUnstableLeadByte = 0xCC;  // UTF-8 lead byte of U+0300

// Invalid bytes travel through the algorithm as values past the last code point.
constexpr char32_t kInvalidByteBase = 0x110000;

// Hangul syllables compose and decompose arithmetically (Unicode ch. 3.12).
constexpr char32_t kSBase = 0xAC00;
constexpr char32_t kLBase = 0x1100;
constexpr char32_t kVBase = 0x1161;
constexpr char32_t kTBase = 0x11A7;
constexpr char32_t kLCount = 19;
constexpr char32_t kVCount = 21;
constexpr char32_t kTCount = 28;
constexpr char32_t kSCount = kLCount * kVCount * kTCount;

int combining_class(char32_t c) {
  if (c < kFirstUnstable || c >= kInvalidByteBase) return 0;
  const auto* end = unicode::kCombiningClassRanges + unicode::kCombiningClassRangeCount;
  const auto* it = std::upper_bound(unicode::kCombiningClassRanges, end, c,
                                    [](char32_t v, const auto& r) { return v < r.first; });
  if (it == unicode::kCombiningClassRanges) return 0;
  --it;
  return c <= it->last ? it->combining_class : 0;
}

void decompose(char32_t c, std::vector<char32_t>& out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    const char32_t s = c - kSBase;
    out.push_back(kLBase + s / (kVCount * kTCount));
    out.push_back(kVBase + (s % (kVCount * kTCount)) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto* end = unicode::kDecompositions + unicode::kDecompositionCount;
  const auto* it = std::lower_bound(unicode::kDecompositions, end, c,
                                    [](const auto& d, char32_t v) { return d.code_point < v; });
  if (it == end || it->code_point != c) {
    out.push_back(c);
    return;
  }
  out.insert(out.end(), unicode::kDecompositionData + it->offset,
             unicode::kDecompositionData + it->offset + it->length);
}

// The primary composite of (first, second), or 0 when there is none.
char32_t compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase &&
      second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const auto* end = unicode::kCompositions + unicode::kCompositionCount;
  const auto* it = std::lower_bound(unicode::kCompositions, end, std::make_pair(first, second),
                                    [](const auto& c, const std::pair<char32_t, char32_t>& v) {
                                      return std::make_pair(c.first, c.second) < v;
                                    });
  if (it == end || it->first != first || it->second != second) return 0;
  return it->composite;
}

std::vector<char32_t> decompose_all(std::string_view text) {
  std::vector<char32_t> units;
  units.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    const utf8::Step s = utf8::step(text, pos);
    if (s.valid) {
      decompose(s.code_point, units);
    } else {
      for (std::size_t i = 0; i < s.length; ++i) {
        units.push_back(kInvalidByteBase + static_cast<unsigned char>(text[pos + i]));
      }
    }
    pos += s.length;
  }
  return units;
}

// Stable-sorts each run of non-starters by combining class.
void reorder(std::vector<char32_t>& units) {
  const auto by_class = [](char32_t a, char32_t b) {
    return combining_class(a) < combining_class(b);
  };
  for (auto it = units.begin(); it != units.end();) {
    if (combining_class(*it) == 0) {
      ++it;
      continue;
    }
    auto run_end = std::find_if(it, units.end(), [](char32_t c) { return combining_class(c) == 0; });
    std::stable_sort(it, run_end, by_class);
    it = run_end;
  }
}

std::vector<char32_t> compose_all(const std::vector<char32_t>& units) {
  std::vector<char32_t> out;
  out.reserve(units.size());
  std::ptrdiff_t starter = -1;
  for (char32_t c : units) {
    const int cc = combining_class(c);
    if (starter >= 0) {
      // Non-starters after the starter are in class order, so the last one
      // alone decides whether c is blocked from the starter.
      const bool adjacent = static_cast<std::ptrdiff_t>(out.size()) - 1 == starter;
      const int last_cc = combining_class(out.back());
      if (adjacent || (last_cc != 0 && last_cc < cc)) {
        if (const char32_t composite = compose(out[starter], c)) {
          out[starter] = composite;
          continue;
        }
      }
    }
    out.push_back(c);
    if (cc == 0) starter = static_cast<std::ptrdiff_t>(out.size()) - 1;
  }
  return out;
}

// The full algorithm, for a span that may change.
void append_nfc(std::string_view text, std::string& out) {
  std::vector<char32_t> units = decompose_all(text);
  reorder(units);
  for (char32_t c : compose_all(units)) {
    if (c >= kInvalidByteBase) {
      out.push_back(static_cast<char>(c - kInvalidByteBase));
    } else {
      utf8::append(out, c);
    }
  }
}

bool is_ascii(char c) { return static_cast<unsigned char>(c) < 0x80; }

}  // namespace

// Runs the full algorithm only from the last ASCII character before a byte
// >= 0xCC up to the next ASCII character. An ASCII character neither
// decomposes nor composes with what precedes it, and combining marks attach to
// the nearest starter before them, so text on either side normalizes alone.
std::string nfc(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t unstable = pos;
    while (unstable < text.size() &&
           static_cast<unsigned char>(text[unstable]) < kFirstUnstableLeadByte) {
      ++unstable;
    }
    if (unstable == text.size()) {
      out.append(text.substr(pos));
      break;
    }
    std::size_t begin = unstable;
    while (begin > pos && !is_ascii(text[begin - 1])) --begin;
    if (begin > pos) --begin;  // the ASCII starter that marks may attach to
    std::size_t end = unstable + 1;
    while (end < text.size() && !is_ascii(text[end])) ++end;
    out.append(text.substr(pos, begin - pos));
    append_nfc(text.substr(begin, end - begin), out);
    pos = end;
  }
  return out;
}

Normalizer Normalizer::from_json(const nlohmann::json& config) {
  Normalizer result;
  if (config.is_null()) return result;
  const auto type = config.is_object() ? config.find("type") : config.end();
  if (type == config.end() || !type->is_string()) {
    throw FormatError("normalizer.type: missing; expected null or an object with a \"type\"");
  }
  if (*type == "NFC") {
    result.nfc_ = true;
    return result;
  }
  if (*type == "Sequence") {
    const auto children = config.find("normalizers");
    if (children == config.end() || !children->is_array()) {
      throw FormatError("normalizer.normalizers: missing; a Sequence needs a list");
    }
    for (std::size_t i = 0; i < children->size(); ++i) {
      const auto& child = (*children)[i];
      if (!child.is_object() || child.value("type", "") != "NFC") {
        throw FormatError("normalizer.normalizers[" + std::to_string(i) +
                          "]: unsupported normalizer " + child.dump() + " (supported: NFC)");
      }
      result.nfc_ = true;
    }
    return result;
  }
  throw FormatError("normalizer.type: unsupported normalizer \"" + type->get<std::string>() +
                    "\" (supported: NFC)");
}

std::string Normalizer::apply(std::string_view text) const {
  return nfc_ ? nfc(text) : std::string(text);
}

}  // namespace rlcore
