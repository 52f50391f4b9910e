// The decoder stage of tokenizer.json: turns the token strings of some ids
// into text, step by step as HF's decode_chain does.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "regex.h"

namespace rlcore {

class Decoder {
 public:
  // `config` is tokenizer.json's "decoder": null (HF joins the tokens with
  // spaces), ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, or a
  // (nested) Sequence of those. Throws FormatError naming the field for
  // anything else.
  static Decoder from_json(const nlohmann::json& config);

  Decoder();
  Decoder(Decoder&&) noexcept;
  Decoder& operator=(Decoder&&) noexcept;
  ~Decoder();

  // True when the decoder is ByteLevel alone: each token then decodes to its
  // own bytes, and the text is their concatenation.
  bool is_byte_level() const { return steps_.size() == 1 && steps_[0].kind == Kind::kByteLevel; }
  bool has_byte_level() const;

  // Runs the steps on `tokens` and joins what is left. `lossy` is HF's
  // decode: bytes that are not UTF-8 (from ByteLevel or ByteFallback) become
  // U+FFFD as HF replaces them. Otherwise the bytes are kept as they are.
  std::string decode(std::vector<std::string> tokens, bool lossy) const;

 private:
  enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace };
  struct Step {
    Kind kind;
    std::shared_ptr<const Regex> pattern;  // Replace
    std::string content;                   // Replace: the replacement; Strip: the character; Metaspace: replacement
    std::size_t start = 0;                 // Strip
    std::size_t stop = 0;                  // Strip
    bool strip_first = true;               // Metaspace: prepend_scheme is not "never"
  };

  void add(const nlohmann::json& config, const std::string& where);

  std::vector<Step> steps_;
  bool null_ = true;  // no decoder at all
};

}  // namespace rlcore
