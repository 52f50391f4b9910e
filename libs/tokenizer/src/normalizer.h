// The normalizer stage of tokenizer.json: NFC (Qwen2), Replace and Prepend
// (SentencePiece-style files: Llama 2, Mistral, Gemma), and Sequences of
// them. Other normalizers are rejected when the file is loaded.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "regex.h"

namespace rlcore {

class Normalizer {
 public:
  // `config` is tokenizer.json's "normalizer": null, NFC, Replace, Prepend or
  // a (nested) Sequence of those. Throws FormatError naming the field (e.g.
  // normalizer.normalizers[1].type) for anything else.
  static Normalizer from_json(const nlohmann::json& config);

  Normalizer();
  Normalizer(Normalizer&&) noexcept;
  Normalizer& operator=(Normalizer&&) noexcept;
  ~Normalizer();

  bool is_identity() const { return steps_.empty(); }
  bool has_nfc() const;
  std::string apply(std::string_view text) const;

  // As apply(), and where each byte of the result comes from in the input, as
  // HF's NormalizedString alignments have it (start offsets only): `origins`
  // holds the input's on entry (one per byte) and the result's on return.
  // Needs no NFC step (has_nfc() false); Metaspace's prepend_scheme "first"
  // is the one reader.
  std::string apply(std::string_view text, std::vector<std::uint32_t>& origins) const;

 private:
  enum class Kind { kNfc, kReplace, kPrepend };
  struct Step {
    Kind kind;
    std::shared_ptr<const Regex> pattern;  // Replace
    std::string content;                   // Replace: the replacement; Prepend: the prefix
  };

  void add(const nlohmann::json& config, const std::string& where);

  std::vector<Step> steps_;
};

// Unicode Normalization Form C. Invalid UTF-8 bytes pass through unchanged and
// block composition across them.
std::string nfc(std::string_view text);

}  // namespace rlcore
