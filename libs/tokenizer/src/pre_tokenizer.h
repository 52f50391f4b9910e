// The pre_tokenizer stage of tokenizer.json: regex Splits, SentencePiece's
// Metaspace and GPT-2's ByteLevel, cutting text into the words BPE merges within.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "regex.h"

namespace rlcore {

class PreTokenizer {
 public:
  // `config` is tokenizer.json's "pre_tokenizer": null (the whole text is one
  // word), Split (String or Regex pattern, any behavior, invert), Metaspace,
  // ByteLevel, or a (nested) Sequence of those where ByteLevel, if present,
  // comes last and Metaspace at most once. Throws FormatError naming the field
  // for anything else.
  static PreTokenizer from_json(const nlohmann::json& config);

  PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Where byte `offset` of the text given to split() starts in the input of
  // encode(): only Metaspace's prepend_scheme "first" asks (is it 0?).
  using OriginOf = std::function<std::size_t(std::size_t offset)>;

  // Calls `emit` with each word, as raw bytes: with a ByteLevel step the
  // byte-to-character mapping is left to BPE. Without Metaspace (or a
  // ByteLevel prefix space) the words cover `text` in order.
  void split(std::string_view text, const OriginOf& origin_of, const std::function<void(std::string_view)>& emit) const;

  // True with a ByteLevel step: BPE then works on byte-level characters.
  bool byte_level() const { return byte_level_; }
  // True when split() reads origin_of (a Metaspace with prepend_scheme "first").
  bool needs_origins() const;

 private:
  enum class Kind { kSplit, kMetaspace, kByteLevel };
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  enum class Prepend { kAlways, kFirst, kNever };
  struct Step {
    Kind kind;
    std::shared_ptr<const Regex> regex;  // Split's pattern; ByteLevel's GPT-2 regex (use_regex)
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    std::string replacement;             // Metaspace
    Prepend prepend = Prepend::kAlways;  // Metaspace
    bool split = true;                   // Metaspace
    bool add_prefix_space = false;       // ByteLevel
  };

  void add_step(const nlohmann::json& step, const std::string& where);

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace rlcore
