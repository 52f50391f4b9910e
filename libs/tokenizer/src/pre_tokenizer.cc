// Reads tokenizer.json's "pre_tokenizer" and cuts text into BPE words the way
// HF's Split, Metaspace and ByteLevel pre-tokenizers do.
#include "pre_tokenizer.h"

#include <algorithm>
#include <forward_list>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "json_fields.h"
#include "utf8.h"

namespace rlcore {
namespace {

using tokenizer_json::type_of;

// GPT-2's pattern, which ByteLevel applies when use_regex is true.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

constexpr std::size_t kNoOffset = static_cast<std::size_t>(-1);

const nlohmann::json* find_key(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

bool bool_field(const nlohmann::json& object, const char* key, bool fallback, const std::string& where) {
  const nlohmann::json* value = find_key(object, key);
  if (value == nullptr || value->is_null()) return fallback;
  if (!value->is_boolean()) throw FormatError(where + "." + key + ": expected true or false");
  return value->get<bool>();
}

// Flattens nested Sequences so the steps can be checked and run in one loop.
void collect_steps(const nlohmann::json& config, const std::string& where,
                   std::vector<std::pair<const nlohmann::json*, std::string>>& steps) {
  if (type_of(config, where) != "Sequence") {
    steps.emplace_back(&config, where);
    return;
  }
  const nlohmann::json* children = find_key(config, "pretokenizers");
  if (children == nullptr || !children->is_array()) {
    throw FormatError(where + ".pretokenizers: missing; a Sequence needs a list");
  }
  for (std::size_t i = 0; i < children->size(); ++i) {
    collect_steps((*children)[i], where + ".pretokenizers[" + std::to_string(i) + "]", steps);
  }
}

std::shared_ptr<const Regex> split_pattern(const nlohmann::json& step, const std::string& where) {
  const nlohmann::json* pattern = find_key(step, "pattern");
  if (pattern != nullptr && pattern->is_object()) {
    for (const char* kind : {"Regex", "String"}) {
      const nlohmann::json* text = find_key(*pattern, kind);
      if (text != nullptr && text->is_string()) {
        return std::make_shared<const Regex>(text->get<std::string>(), std::string(kind) == "String",
                                             where + ".pattern." + kind);
      }
    }
  }
  throw FormatError(where + ".pattern: expected {\"Regex\": \"...\"} or {\"String\": \"...\"}");
}

// The one character a Metaspace "replacement" must be.
std::string single_character(const nlohmann::json& step, const char* key, const std::string& where) {
  const nlohmann::json* value = find_key(step, key);
  if (value != nullptr && value->is_string()) {
    const std::string& text = value->get_ref<const std::string&>();
    if (!text.empty()) {
      const utf8::Step s = utf8::step(text, 0);
      if (s.valid && s.length == text.size()) return text;
    }
  }
  throw FormatError(where + "." + key + ": expected a string of one character, got " +
                    (value ? value->dump() : std::string("nothing")));
}

}  // namespace

PreTokenizer::PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

PreTokenizer PreTokenizer::from_json(const nlohmann::json& config) {
  PreTokenizer result;
  if (config.is_null()) return result;
  std::vector<std::pair<const nlohmann::json*, std::string>> steps;
  collect_steps(config, "pre_tokenizer", steps);
  for (const auto& [step, where] : steps) {
    if (result.byte_level_) {
      // BPE maps bytes to byte-level characters after the last step; a step
      // after ByteLevel would have to see them already mapped.
      throw FormatError(where + ": " + type_of(*step, where) +
                        " after ByteLevel is not supported; ByteLevel must be the last step");
    }
    result.add_step(*step, where);
  }
  return result;
}

void PreTokenizer::add_step(const nlohmann::json& config, const std::string& where) {
  const std::string type = type_of(config, where);
  Step step{};
  if (type == "Split") {
    step.kind = Kind::kSplit;
    step.regex = split_pattern(config, where);
    const nlohmann::json* behavior = find_key(config, "behavior");
    static const std::pair<const char*, Behavior> kBehaviors[] = {{"Removed", Behavior::kRemoved},
                                                                  {"Isolated", Behavior::kIsolated},
                                                                  {"MergedWithPrevious", Behavior::kMergedWithPrevious},
                                                                  {"MergedWithNext", Behavior::kMergedWithNext},
                                                                  {"Contiguous", Behavior::kContiguous}};
    bool known = false;
    for (const auto& [name, value] : kBehaviors) {
      if (behavior != nullptr && *behavior == name) {
        step.behavior = value;
        known = true;
      }
    }
    if (!known) {
      throw FormatError(where +
                        ".behavior: expected one of Removed, Isolated, MergedWithPrevious, "
                        "MergedWithNext, Contiguous; got " +
                        (behavior ? behavior->dump() : std::string("nothing")));
    }
    step.invert = bool_field(config, "invert", false, where);
  } else if (type == "Metaspace") {
    for (const Step& earlier : steps_) {
      if (earlier.kind == Kind::kMetaspace) {
        throw FormatError(where + ": a second Metaspace step is not supported");
      }
    }
    step.kind = Kind::kMetaspace;
    step.replacement = single_character(config, "replacement", where);
    const nlohmann::json* scheme = find_key(config, "prepend_scheme");
    if (scheme == nullptr || scheme->is_null() || *scheme == "always") {
      step.prepend = Prepend::kAlways;  // HF's default
    } else if (*scheme == "first") {
      step.prepend = Prepend::kFirst;
    } else if (*scheme == "never") {
      step.prepend = Prepend::kNever;
    } else {
      throw FormatError(where + ".prepend_scheme: expected \"first\", \"always\" or \"never\", got " + scheme->dump());
    }
    // Older files say add_prefix_space; HF accepts false only with "never".
    if (!bool_field(config, "add_prefix_space", true, where)) {
      if (step.prepend != Prepend::kNever) {
        throw FormatError(where + ".add_prefix_space: false does not match prepend_scheme (HF refuses it too)");
      }
    }
    step.split = bool_field(config, "split", true, where);
  } else if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
    // HF's ByteLevel::default() when a flag is absent; trim_offsets only moves offsets.
    step.add_prefix_space = bool_field(config, "add_prefix_space", true, where);
    if (bool_field(config, "use_regex", true, where)) {
      step.regex = std::make_shared<const Regex>(kGpt2Pattern, false, where + " (GPT-2 pattern)");
    }
    byte_level_ = true;
    // Without a prefix space or the regex it only marks the words byte-level,
    // which BPE takes care of: split() has nothing to do for it.
    if (!step.add_prefix_space && !step.regex) return;
  } else {
    throw FormatError(where + ".type: unsupported pre-tokenizer \"" + type +
                      "\" (supported: ByteLevel, Metaspace, Split, Sequence)");
  }
  steps_.push_back(std::move(step));
}

bool PreTokenizer::needs_origins() const {
  for (const Step& step : steps_) {
    if (step.kind == Kind::kMetaspace && step.prepend == Prepend::kFirst) return true;
  }
  return false;
}

namespace {

struct Piece {
  std::string_view text;
  std::size_t offset;  // in the text given to split(); kNoOffset once a step rewrote it
};

// HF's NormalizedString::split: what each behavior makes of find_matches' list.
template <typename Behavior>
void split_piece(const Piece& piece, const Regex& regex, Behavior behavior, bool invert,
                 std::vector<Regex::Match>& matches, std::vector<std::string_view>& words, std::vector<Piece>& out) {
  if (behavior == Behavior::kIsolated) {
    // Matches and gaps alike become pieces (what byte-level files use; fast).
    words.clear();
    regex.split_isolated(piece.text, words);
    for (std::string_view word : words) {
      const auto at = static_cast<std::size_t>(word.data() - piece.text.data());
      out.push_back({word, piece.offset == kNoOffset ? kNoOffset : piece.offset + at});
    }
    return;
  }
  matches.clear();
  regex.find_matches(piece.text, matches);
  if (invert) {
    for (Regex::Match& m : matches) m.is_match = !m.is_match;
  }
  struct Range {
    std::size_t begin;
    std::size_t end;
  };
  std::vector<Range> ranges;
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kIsolated:  // taken above
      break;
    case Behavior::kRemoved:
      for (const auto& m : matches) {
        if (!m.is_match) ranges.push_back({m.begin, m.end});
      }
      break;
    case Behavior::kContiguous:
      for (const auto& m : matches) {
        if (m.is_match == previous_match && !ranges.empty()) {
          ranges.back().end = m.end;
        } else {
          ranges.push_back({m.begin, m.end});
        }
        previous_match = m.is_match;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const auto& m : matches) {
        if (m.is_match && !previous_match && !ranges.empty()) {
          ranges.back().end = m.end;
        } else {
          ranges.push_back({m.begin, m.end});
        }
        previous_match = m.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        if (it->is_match && !previous_match && !ranges.empty()) {
          ranges.back().begin = it->begin;
        } else {
          ranges.push_back({it->begin, it->end});
        }
        previous_match = it->is_match;
      }
      std::reverse(ranges.begin(), ranges.end());
      break;
  }
  for (const Range& r : ranges) {
    if (r.end == r.begin) continue;  // HF drops empty splits
    out.push_back(
        {piece.text.substr(r.begin, r.end - r.begin), piece.offset == kNoOffset ? kNoOffset : piece.offset + r.begin});
  }
}

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

}  // namespace

void PreTokenizer::split(std::string_view text, const OriginOf& origin_of,
                         const std::function<void(std::string_view)>& emit) const {
  if (text.empty()) return;
  // Scratch buffers kept per thread: encoding many short texts would
  // otherwise spend much of its time allocating them.
  thread_local std::vector<Piece> pieces;
  thread_local std::vector<Piece> next;
  thread_local std::vector<Regex::Match> matches;
  thread_local std::vector<std::string_view> words;
  std::forward_list<std::string> storage;  // rewritten pieces, which stay in place
  pieces.assign(1, Piece{text, 0});
  for (const Step& step : steps_) {
    next.clear();
    for (const Piece& piece : pieces) {
      switch (step.kind) {
        case Kind::kSplit:
          split_piece(piece, *step.regex, step.behavior, step.invert, matches, words, next);
          break;
        case Kind::kMetaspace: {
          // HF: replace ' ' by the replacement, prepend it per the scheme, then
          // split before each replacement (MergedWithNext).
          std::string& rewritten = storage.emplace_front();
          for (char c : piece.text) {
            if (c == ' ') {
              rewritten += step.replacement;
            } else {
              rewritten += c;
            }
          }
          if (!starts_with(rewritten, step.replacement) &&
              (step.prepend == Prepend::kAlways ||
               (step.prepend == Prepend::kFirst && piece.offset != kNoOffset && origin_of(piece.offset) == 0))) {
            rewritten.insert(0, step.replacement);
          }
          if (!step.split) {
            next.push_back({rewritten, kNoOffset});
            break;
          }
          std::size_t begin = 0;
          // Each replacement starts a word, unless the next character is one too.
          for (std::size_t pos = 0; pos < rewritten.size();) {
            const std::size_t length = utf8::step(rewritten, pos).length;
            if (pos > begin && starts_with(std::string_view(rewritten).substr(pos), step.replacement)) {
              next.push_back({std::string_view(rewritten).substr(begin, pos - begin), kNoOffset});
              begin = pos;
            }
            pos += length;
          }
          if (begin < rewritten.size()) {
            next.push_back({std::string_view(rewritten).substr(begin), kNoOffset});
          }
          break;
        }
        case Kind::kByteLevel: {
          std::string_view word = piece.text;
          if (step.add_prefix_space && word.front() != ' ') {
            std::string& prefixed = storage.emplace_front(" ");
            prefixed.append(word);
            word = prefixed;
          }
          if (!step.regex) {
            next.push_back({word, kNoOffset});
            break;
          }
          words.clear();
          step.regex->split_isolated(word, words);
          for (std::string_view w : words) next.push_back({w, kNoOffset});
          break;
        }
      }
    }
    pieces.swap(next);
  }
  for (const Piece& piece : pieces) {
    if (!piece.text.empty()) emit(piece.text);
  }
}

}  // namespace rlcore
