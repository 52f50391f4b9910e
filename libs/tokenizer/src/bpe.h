// The BPE model of tokenizer.json ("model"): vocabulary, merges by rank, and
// the merge loop that turns one pre-tokenized word into ids. Byte-level files
// (GPT-2, Qwen, Llama 3) spell bytes as characters; SentencePiece-style files
// (Llama 2, Mistral, Gemma) spell text as it is, with <0xNN> byte_fallback
// tokens and an unk_token for characters the vocabulary lacks.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace rlcore {

class WordCache;

class BpeModel {
 public:
  // Ids beyond this are rejected: the id -> token table is a dense vector.
  static constexpr std::int32_t kMaxId = 1 << 24;

  // `config` is tokenizer.json's "model". With `byte_level` (the
  // pre-tokenizer has ByteLevel) a word's bytes map to GPT-2's byte
  // characters, else its UTF-8 characters are the symbols. Throws FormatError
  // naming the field (model.type, model.vocab, model.merges[i], ...) for what
  // is not supported.
  static BpeModel from_json(const nlohmann::json& config, bool byte_level);

  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;
  ~BpeModel();

  // Appends the ids of one word given as raw bytes (invalid UTF-8 included:
  // each invalid byte is a symbol no token has). Thread-safe.
  void encode_word(std::string_view word, std::vector<std::int32_t>& ids) const;

  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  // nullptr when no token has this id.
  const std::string* id_to_token(std::int32_t id) const;
  // The number of tokens in the vocabulary (HF's get_vocab_size).
  std::int32_t size() const { return static_cast<std::int32_t>(vocab_.size()); }
  // Largest id in the vocabulary, -1 when empty.
  std::int32_t max_id() const { return static_cast<std::int32_t>(tokens_by_id_.size()) - 1; }

 private:
  struct Merge {
    std::int32_t rank;
    std::int32_t new_id;
  };

  BpeModel();
  static std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
  }
  void parse_vocab(const nlohmann::json& vocab);
  void parse_merges(const nlohmann::json& merges);
  void resolve_symbol_ids(const nlohmann::json& config);
  void merge_word(std::string_view word, std::vector<std::int32_t>& ids) const;
  // The vocabulary id of one symbol (a byte in byte-level mode, else one
  // character or invalid byte); -1 when the vocabulary lacks it.
  std::int32_t symbol_id(std::string_view symbol) const;

  std::unordered_map<std::string, std::int32_t> vocab_;
  std::vector<const std::string*> tokens_by_id_;  // points into vocab_'s keys
  std::unordered_map<std::uint64_t, Merge> merges_;
  bool byte_level_ = true;
  // Byte-level: the id of each byte's character; -1 where the vocabulary lacks it.
  std::array<std::int32_t, 256> byte_ids_{};
  // Otherwise: ids of the one-character tokens, by code point (ASCII in an array).
  std::array<std::int32_t, 128> ascii_ids_{};
  std::unordered_map<char32_t, std::int32_t> char_ids_;
  // byte_fallback: the id of "<0xNN>" for each byte; -1 where there is none.
  bool byte_fallback_ = false;
  std::array<std::int32_t, 256> fallback_ids_{};
  std::optional<std::int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;  // Llama-3: a word that is itself a token skips merging
  std::unique_ptr<WordCache> cache_;
};

}  // namespace rlcore
