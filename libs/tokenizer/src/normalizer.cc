// The normalizers: NFC by the book (UAX #15: full canonical decomposition,
// canonical ordering, then canonical composition, over the generated Unicode
// tables), and HF's Replace and Prepend.
#include "normalizer.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "json_fields.h"
#include "unicode_tables.h"
#include "utf8.h"

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
  const auto* it =
      std::upper_bound(unicode::kCombiningClassRanges, end, c, [](char32_t v, const auto& r) { return v < r.first; });
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
  const auto* it =
      std::lower_bound(unicode::kDecompositions, end, c, [](const auto& d, char32_t v) { return d.code_point < v; });
  if (it == end || it->code_point != c) {
    out.push_back(c);
    return;
  }
  out.insert(out.end(), unicode::kDecompositionData + it->offset,
             unicode::kDecompositionData + it->offset + it->length);
}

// The primary composite of (first, second), or 0 when there is none.
char32_t compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 && second > kTBase &&
      second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const auto* end = unicode::kCompositions + unicode::kCompositionCount;
  const auto* it = std::lower_bound(
      unicode::kCompositions, end, std::make_pair(first, second),
      [](const auto& c, const std::pair<char32_t, char32_t>& v) { return std::make_pair(c.first, c.second) < v; });
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
  const auto by_class = [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); };
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
    while (unstable < text.size() && static_cast<unsigned char>(text[unstable]) < kFirstUnstableLeadByte) {
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

namespace {

using tokenizer_json::type_of;

const nlohmann::json& string_field(const nlohmann::json& config, const char* key, const std::string& where) {
  const auto it = config.find(key);
  if (it == config.end() || !it->is_string()) {
    throw FormatError(where + "." + key + ": missing; expected a string");
  }
  return *it;
}

}  // namespace

Normalizer::Normalizer() = default;
Normalizer::Normalizer(Normalizer&&) noexcept = default;
Normalizer& Normalizer::operator=(Normalizer&&) noexcept = default;
Normalizer::~Normalizer() = default;

Normalizer Normalizer::from_json(const nlohmann::json& config) {
  Normalizer result;
  if (!config.is_null()) result.add(config, "normalizer");
  return result;
}

void Normalizer::add(const nlohmann::json& config, const std::string& where) {
  const std::string type = type_of(config, where);
  if (type == "Sequence") {
    const auto children = config.find("normalizers");
    if (children == config.end() || !children->is_array()) {
      throw FormatError(where + ".normalizers: missing; a Sequence needs a list");
    }
    for (std::size_t i = 0; i < children->size(); ++i) {
      add((*children)[i], where + ".normalizers[" + std::to_string(i) + "]");
    }
  } else if (type == "NFC") {
    steps_.push_back({Kind::kNfc, nullptr, ""});
  } else if (type == "Prepend") {
    steps_.push_back({Kind::kPrepend, nullptr, string_field(config, "prepend", where).get<std::string>()});
  } else if (type == "Replace") {
    // HF compiles both forms as a regex: a String pattern is escaped first.
    const auto pattern = config.find("pattern");
    for (const char* kind : {"String", "Regex"}) {
      if (pattern == config.end() || !pattern->is_object()) break;
      const auto text = pattern->find(kind);
      if (text == pattern->end() || !text->is_string()) continue;
      steps_.push_back(
          {Kind::kReplace,
           std::make_shared<const Regex>(text->get<std::string>(), kind[0] == 'S', where + ".pattern." + kind),
           string_field(config, "content", where).get<std::string>()});
      return;
    }
    throw FormatError(where + ".pattern: expected {\"String\": \"...\"} or {\"Regex\": \"...\"}");
  } else {
    throw FormatError(where + ".type: unsupported normalizer \"" + type +
                      "\" (supported: NFC, Replace, Prepend, Sequence)");
  }
}

bool Normalizer::has_nfc() const {
  for (const Step& step : steps_) {
    if (step.kind == Kind::kNfc) return true;
  }
  return false;
}

std::string Normalizer::apply(std::string_view text) const {
  std::string current(text);
  std::vector<Regex::Match> matches;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kNfc:
        current = nfc(current);
        break;
      case Kind::kPrepend:
        if (!current.empty()) current.insert(0, step.content);
        break;
      case Kind::kReplace: {
        matches.clear();
        step.pattern->find_matches(current, matches);
        std::string out;
        out.reserve(current.size());
        for (const Regex::Match& m : matches) {
          if (m.is_match) {
            out += step.content;
          } else {
            out.append(current, m.begin, m.end - m.begin);
          }
        }
        current = std::move(out);
        break;
      }
    }
  }
  return current;
}

// HF's NormalizedString keeps, for every byte, the input range it stands for;
// only the starts are kept here. Prepend gives its characters the first
// character's alignment; Replace gives each inserted character the alignment
// of the last byte of the match it replaces ((0, 0) for an empty match at 0).
std::string Normalizer::apply(std::string_view text, std::vector<std::uint32_t>& origins) const {
  std::string current(text);
  std::vector<Regex::Match> matches;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kNfc:
        throw std::logic_error("Normalizer::apply with origins: NFC keeps no alignments here");
      case Kind::kPrepend:
        if (!current.empty()) {
          current.insert(0, step.content);
          origins.insert(origins.begin(), step.content.size(), origins.front());
        }
        break;
      case Kind::kReplace: {
        matches.clear();
        step.pattern->find_matches(current, matches);
        std::string out;
        std::vector<std::uint32_t> out_origins;
        for (const Regex::Match& m : matches) {
          if (m.is_match) {
            out += step.content;
            out_origins.insert(out_origins.end(), step.content.size(), m.end == 0 ? 0 : origins[m.end - 1]);
          } else {
            out.append(current, m.begin, m.end - m.begin);
            out_origins.insert(out_origins.end(), origins.begin() + static_cast<std::ptrdiff_t>(m.begin),
                               origins.begin() + static_cast<std::ptrdiff_t>(m.end));
          }
        }
        current = std::move(out);
        origins = std::move(out_origins);
        break;
      }
    }
  }
  return current;
}

}  // namespace rlcore
