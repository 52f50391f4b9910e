// The normalizer stage of tokenizer.json. Only NFC (what Qwen2 ships) is
// implemented; other normalizers are rejected when the file is loaded.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace rlcore {

class Normalizer {
 public:
  // `config` is tokenizer.json's "normalizer": null, NFC, or a Sequence of NFCs.
  // Throws FormatError naming the field for anything else.
  static Normalizer from_json(const nlohmann::json& config);

  bool is_identity() const { return !nfc_; }
  std::string apply(std::string_view text) const;

 private:
  bool nfc_ = false;
};

// Unicode Normalization Form C. Invalid UTF-8 bytes pass through unchanged and
// block composition across them.
std::string nfc(std::string_view text);

}  // namespace rlcore
