// HF's decoders, step for step: ByteLevel, Replace, ByteFallback, Fuse, Strip,
// Metaspace and Sequence (tokenizers 0.23's decode_chain of each).
#include "decoder.h"

#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "json_fields.h"
#include "byte_level.h"
#include "utf8.h"

namespace rlcore {
namespace {

using tokenizer_json::type_of;

constexpr const char* kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

std::string one_character(const nlohmann::json& config, const char* key, const std::string& where) {
  const auto value = config.find(key);
  if (value != config.end() && value->is_string()) {
    const std::string& text = value->get_ref<const std::string&>();
    if (!text.empty()) {
      const utf8::Step s = utf8::step(text, 0);
      if (s.valid && s.length == text.size()) return text;
    }
  }
  throw FormatError(where + "." + key + ": expected a string of one character");
}

std::size_t count_field(const nlohmann::json& config, const char* key, const std::string& where) {
  const auto value = config.find(key);
  if (value == config.end() || !value->is_number_unsigned()) {
    throw FormatError(where + "." + key + ": expected a non-negative integer");
  }
  return value->get<std::size_t>();
}

// The token HF's ByteFallback reads as a byte: exactly "<0x" two hex digits ">".
bool fallback_byte(const std::string& token, unsigned char& byte) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return false;
  unsigned value = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = token[static_cast<std::size_t>(i)];
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      value |= static_cast<unsigned>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      value |= static_cast<unsigned>(c - 'A' + 10);
    } else {
      return false;
    }
  }
  byte = static_cast<unsigned char>(value);
  return true;
}

bool is_utf8(const std::string& bytes) {
  for (std::size_t pos = 0; pos < bytes.size();) {
    const utf8::Step s = utf8::step(bytes, pos);
    if (!s.valid) return false;
    pos += s.length;
  }
  return true;
}

// A run of byte tokens: one token when the bytes are UTF-8; else HF gives one
// U+FFFD per byte, and the raw decode one token per byte.
void flush_bytes(std::string& run, bool lossy, std::vector<std::string>& out) {
  if (run.empty()) return;
  if (is_utf8(run)) {
    out.push_back(run);
  } else {
    for (char byte : run) out.emplace_back(lossy ? std::string(kReplacementCharacter) : std::string(1, byte));
  }
  run.clear();
}

}  // namespace

Decoder::Decoder() = default;
Decoder::Decoder(Decoder&&) noexcept = default;
Decoder& Decoder::operator=(Decoder&&) noexcept = default;
Decoder::~Decoder() = default;

Decoder Decoder::from_json(const nlohmann::json& config) {
  Decoder result;
  if (config.is_null()) return result;
  result.null_ = false;
  result.add(config, "decoder");
  return result;
}

void Decoder::add(const nlohmann::json& config, const std::string& where) {
  const std::string type = type_of(config, where);
  Step step{};
  if (type == "Sequence") {
    const auto children = config.find("decoders");
    if (children == config.end() || !children->is_array()) {
      throw FormatError(where + ".decoders: missing; a Sequence needs a list");
    }
    for (std::size_t i = 0; i < children->size(); ++i) {
      add((*children)[i], where + ".decoders[" + std::to_string(i) + "]");
    }
    return;
  }
  if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
  } else if (type == "ByteFallback") {
    step.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = Kind::kFuse;
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    const auto pattern = config.find("pattern");
    for (const char* kind : {"String", "Regex"}) {
      if (pattern == config.end() || !pattern->is_object()) break;
      const auto text = pattern->find(kind);
      if (text == pattern->end() || !text->is_string()) continue;
      step.pattern =
          std::make_shared<const Regex>(text->get<std::string>(), kind[0] == 'S', where + ".pattern." + kind);
    }
    if (!step.pattern) {
      throw FormatError(where + ".pattern: expected {\"String\": \"...\"} or {\"Regex\": \"...\"}");
    }
    const auto content = config.find("content");
    if (content == config.end() || !content->is_string()) {
      throw FormatError(where + ".content: missing; expected a string");
    }
    step.content = content->get<std::string>();
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    step.content = one_character(config, "content", where);
    step.start = count_field(config, "start", where);
    step.stop = count_field(config, "stop", where);
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    step.content = one_character(config, "replacement", where);
    const auto scheme = config.find("prepend_scheme");
    std::string prepend = "always";  // HF's default
    if (scheme != config.end() && !scheme->is_null()) {
      if (!scheme->is_string() || (*scheme != "always" && *scheme != "first" && *scheme != "never")) {
        throw FormatError(where + ".prepend_scheme: expected \"first\", \"always\" or \"never\", got " +
                          scheme->dump());
      }
      prepend = scheme->get<std::string>();
    }
    const auto add_prefix_space = config.find("add_prefix_space");
    if (add_prefix_space != config.end() && *add_prefix_space == false && prepend != "never") {
      throw FormatError(where + ".add_prefix_space: false does not match prepend_scheme (HF refuses it too)");
    }
    step.strip_first = prepend != "never";
  } else {
    throw FormatError(where + ".type: unsupported decoder \"" + type +
                      "\" (supported: ByteLevel, ByteFallback, Fuse, Metaspace, Replace, Strip, Sequence)");
  }
  steps_.push_back(std::move(step));
}

bool Decoder::has_byte_level() const {
  for (const Step& step : steps_) {
    if (step.kind == Kind::kByteLevel) return true;
  }
  return false;
}

std::string Decoder::decode(std::vector<std::string> tokens, bool lossy) const {
  std::string joined;
  if (null_) {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) joined += ' ';
      joined += tokens[i];
    }
    return joined;
  }
  std::vector<std::string> next;
  std::vector<Regex::Match> matches;
  for (const Step& step : steps_) {
    next.clear();
    switch (step.kind) {
      case Kind::kByteLevel: {
        std::string bytes;
        for (const std::string& token : tokens) {
          if (!byte_level::decode(token, bytes)) bytes += token;
        }
        next.push_back(lossy ? utf8::replace_invalid(bytes) : std::move(bytes));
        break;
      }
      case Kind::kByteFallback: {
        std::string run;
        for (std::string& token : tokens) {
          unsigned char byte = 0;
          if (fallback_byte(token, byte)) {
            run.push_back(static_cast<char>(byte));
            continue;
          }
          flush_bytes(run, lossy, next);
          next.push_back(std::move(token));
        }
        flush_bytes(run, lossy, next);
        break;
      }
      case Kind::kFuse: {
        std::string fused;
        for (const std::string& token : tokens) fused += token;
        next.push_back(std::move(fused));
        break;
      }
      case Kind::kReplace:
        for (const std::string& token : tokens) {
          matches.clear();
          step.pattern->find_matches(token, matches);
          std::string replaced;
          for (const Regex::Match& m : matches) {
            if (m.is_match) {
              replaced += step.content;
            } else {
              replaced.append(token, m.begin, m.end - m.begin);
            }
          }
          next.push_back(std::move(replaced));
        }
        break;
      case Kind::kStrip:
        for (std::string& token : tokens) {
          // The content is one valid character, so comparing bytes at
          // either end finds exactly the characters HF's char-wise loop does.
          const std::string_view content = step.content;
          std::size_t begin = 0;
          for (std::size_t n = 0; n < step.start && token.compare(begin, content.size(), content) == 0; ++n) {
            begin += content.size();
          }
          std::size_t end = token.size();
          // HF panics where the two cuts cross; here they simply meet.
          for (std::size_t n = 0; n < step.stop && end >= begin + content.size() &&
                                  token.compare(end - content.size(), content.size(), content) == 0;
               ++n) {
            end -= content.size();
          }
          next.push_back(token.substr(begin, end - begin));
        }
        break;
      case Kind::kMetaspace:
        for (std::size_t i = 0; i < tokens.size(); ++i) {
          // In the first token every replacement goes (unless prepend_scheme is
          // "never"); elsewhere each becomes a space.
          const std::string& token = tokens[i];
          std::string text;
          for (std::size_t pos = 0; pos < token.size();) {
            const std::size_t length = utf8::step(token, pos).length;
            if (token.compare(pos, length, step.content) != 0) {
              text.append(token, pos, length);
            } else if (i != 0 || !step.strip_first) {
              text += ' ';
            }
            pos += length;
          }
          next.push_back(std::move(text));
        }
        break;
    }
    tokens.swap(next);
  }
  for (const std::string& token : tokens) joined += token;
  return joined;
}

}  // namespace rlcore
