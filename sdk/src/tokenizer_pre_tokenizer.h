// The pre_tokenizer stage of tokenizer.json: regex Splits, then GPT-2's
// ByteLevel step, cutting text into the words BPE merges within.
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer_regex.h"

namespace rlcore {

class PreTokenizer {
 public:
  // `config` is tokenizer.json's "pre_tokenizer": ByteLevel, or a Sequence of
  // Splits (Regex or String pattern, behavior Isolated) ending in ByteLevel.
  // Throws FormatError naming the field for anything else.
  static PreTokenizer from_json(const nlohmann::json& config);

  // Calls `emit` with each word, as raw bytes (the byte-level mapping is BPE's
  // job). The words cover `text` in order, plus any prefix space ByteLevel adds.
  void split(std::string_view text, const std::function<void(std::string_view)>& emit) const;

 private:
  std::vector<std::unique_ptr<Regex>> splits_;  // applied in order, each to every piece
  bool add_prefix_space_ = false;
  std::unique_ptr<Regex> byte_level_regex_;  // GPT-2's pattern, when use_regex
};

}  // namespace rlcore
