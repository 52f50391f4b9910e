// Added tokens (tokenizer.json's "added_tokens"): found in the text before
// pre-tokenization, leftmost-longest, and never split by BPE.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "normalizer.h"
#include "regex.h"

namespace rlcore {

struct AddedToken {
  std::int32_t id = -1;
  std::string content;
  bool special = false;
  bool single_word = false;  // match only where no word character touches it
  bool lstrip = false;       // swallow the whitespace before it
  bool rstrip = false;       // swallow the whitespace after it
  bool normalized = false;   // matched in normalized text rather than raw text
};

// Byte trie over token contents; answers "longest key starting here".
class TokenTrie {
 public:
  void insert(std::string_view key, std::int32_t value);
  // (length, value) of the longest key that `text` has at `pos`; value -1 when none.
  std::pair<std::size_t, std::int32_t> longest_at(std::string_view text, std::size_t pos) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, std::int32_t>> children;
    std::int32_t value = -1;
  };
  std::vector<Node> nodes_{Node{}};
  std::array<bool, 256> starts_key_{};  // lets the scan skip most bytes in one test
};

class AddedVocabulary {
 public:
  // A piece of the input: an added token (id >= 0) or text still to tokenize.
  struct Segment {
    std::string_view text;
    std::int32_t id = -1;
  };

  // The model's id for a token, if its vocabulary has it.
  using ModelIds = std::function<std::optional<std::int32_t>(const std::string&)>;

  // `config` is tokenizer.json's "added_tokens" (null or absent: none). Ids
  // are given as HF gives them, from `model_id` and the model's vocabulary
  // size (the number of its tokens), not read from the file. Contents of
  // normalized tokens go through `normalizer`, since that is the text they
  // are matched in. Throws FormatError naming the entry at fault.
  static AddedVocabulary from_json(const nlohmann::json& config, const Normalizer& normalizer, const ModelIds& model_id,
                                   std::int32_t model_vocab_size);

  // HF matches in two passes: tokens with normalized=false in the raw text, then
  // those with normalized=true in each remaining piece after normalization.
  // With parse_special false, special tokens are left in the text.
  void split(std::string_view text, bool normalized_pass, bool parse_special, std::vector<Segment>& out) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  // HF's special_tokens_set: the contents of every entry marked special.
  bool is_special_content(const std::string& content) const { return special_contents_.count(content) > 0; }

 private:
  bool single_word_ok(std::string_view text, std::size_t begin, std::size_t end) const;

  std::vector<AddedToken> tokens_;
  std::unordered_set<std::string> special_contents_;
  TokenTrie raw_trie_;  // values index tokens_
  TokenTrie normalized_trie_;
  std::unique_ptr<Regex> word_char_;  // built only when some token is single_word
};

}  // namespace rlcore
