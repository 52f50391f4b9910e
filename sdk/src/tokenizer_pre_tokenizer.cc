// Reads tokenizer.json's "pre_tokenizer" and cuts text into BPE words the way
// HF's Split and ByteLevel pre-tokenizers do.
#include "tokenizer_pre_tokenizer.h"

#include <nlohmann/json.hpp>

#include "rlcore/error.h"

namespace rlcore {
namespace {

// GPT-2's pattern, which ByteLevel applies when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

const nlohmann::json* find_key(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

bool bool_field(const nlohmann::json& object, const char* key, bool fallback,
                const std::string& where) {
  const nlohmann::json* value = find_key(object, key);
  if (value == nullptr || value->is_null()) return fallback;
  if (!value->is_boolean()) throw FormatError(where + "." + key + ": expected true or false");
  return value->get<bool>();
}

std::string type_of(const nlohmann::json& step, const std::string& where) {
  const nlohmann::json* type = step.is_object() ? find_key(step, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    throw FormatError(where + ".type: missing; expected an object with a string \"type\"");
  }
  return type->get<std::string>();
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

std::unique_ptr<Regex> split_regex(const nlohmann::json& step, const std::string& where) {
  const nlohmann::json* behavior = find_key(step, "behavior");
  if (behavior == nullptr || *behavior != "Isolated") {
    throw FormatError(where + ".behavior: only \"Isolated\" is supported, got " +
                      (behavior ? behavior->dump() : std::string("nothing")));
  }
  if (bool_field(step, "invert", false, where)) {
    throw FormatError(where + ".invert: true is not supported");
  }
  const nlohmann::json* pattern = find_key(step, "pattern");
  if (pattern != nullptr && pattern->is_object()) {
    for (const char* kind : {"Regex", "String"}) {
      const nlohmann::json* text = find_key(*pattern, kind);
      if (text != nullptr && text->is_string()) {
        return std::make_unique<Regex>(text->get<std::string>(), std::string(kind) == "String",
                                       where + ".pattern." + kind);
      }
    }
  }
  throw FormatError(where + ".pattern: expected {\"Regex\": \"...\"} or {\"String\": \"...\"}");
}

}  // namespace

PreTokenizer PreTokenizer::from_json(const nlohmann::json& config) {
  const std::string root = "pre_tokenizer";
  if (config.is_null()) {
    throw FormatError(root + ": missing; byte-level BPE needs a ByteLevel pre-tokenizer");
  }
  std::vector<std::pair<const nlohmann::json*, std::string>> steps;
  collect_steps(config, root, steps);
  if (steps.empty()) {
    throw FormatError(root + ": empty Sequence; byte-level BPE needs a final ByteLevel step");
  }

  PreTokenizer result;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const nlohmann::json& step = *steps[i].first;
    const std::string& where = steps[i].second;
    const std::string type = type_of(step, where);
    const bool last = i + 1 == steps.size();
    if (type == "Split" && !last) {
      result.splits_.push_back(split_regex(step, where));
    } else if (type == "ByteLevel" && last) {
      // HF's ByteLevel::default() when a flag is absent; trim_offsets only moves offsets.
      result.add_prefix_space_ = bool_field(step, "add_prefix_space", true, where);
      if (bool_field(step, "use_regex", true, where)) {
        result.byte_level_regex_ =
            std::make_unique<Regex>(kGpt2Pattern, false, where + " (GPT-2 pattern)");
      }
    } else if (type == "Split" || type == "ByteLevel") {
      throw FormatError(where + ": " + type +
                        " is out of place; expected Splits followed by one final ByteLevel");
    } else {
      throw FormatError(where + ".type: unsupported pre-tokenizer \"" + type +
                        "\" (supported: ByteLevel, Split, Sequence)");
    }
  }
  return result;
}

void PreTokenizer::split(std::string_view text,
                         const std::function<void(std::string_view)>& emit) const {
  std::vector<std::string_view> pieces{text};
  std::vector<std::string_view> next;
  for (const auto& regex : splits_) {
    next.clear();
    for (std::string_view piece : pieces) regex->split_isolated(piece, next);
    pieces.swap(next);
  }
  std::string prefixed;
  for (std::string_view piece : pieces) {
    if (piece.empty()) continue;
    if (add_prefix_space_ && piece.front() != ' ') {
      prefixed.assign(" ").append(piece);
      piece = prefixed;
    }
    if (!byte_level_regex_) {
      emit(piece);
      continue;
    }
    next.clear();
    byte_level_regex_->split_isolated(piece, next);
    for (std::string_view word : next) emit(word);
  }
}

}  // namespace rlcore
