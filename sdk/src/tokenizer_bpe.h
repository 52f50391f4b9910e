// The byte-level BPE model of tokenizer.json ("model"): vocabulary, merges by
// rank, and the merge loop that turns one pre-tokenized word into ids.
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

  // `config` is tokenizer.json's "model". Throws FormatError naming the field
  // (model.type, model.vocab, model.merges[i], ...) when it is not byte-level BPE.
  static BpeModel from_json(const nlohmann::json& config);

  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;
  ~BpeModel();

  // Appends the ids of one word given as raw bytes. Thread-safe.
  void encode_word(std::string_view word, std::vector<std::int32_t>& ids) const;

  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  // nullptr when no token has this id.
  const std::string* id_to_token(std::int32_t id) const;
  // Largest id in the vocabulary, -1 when empty.
  std::int32_t max_id() const { return static_cast<std::int32_t>(tokens_by_id_.size()) - 1; }

 private:
  struct Merge {
    std::int32_t rank;
    std::int32_t new_id;
  };

  BpeModel();
  static std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
           static_cast<std::uint32_t>(right);
  }
  void parse_vocab(const nlohmann::json& vocab);
  void parse_merges(const nlohmann::json& merges);
  void resolve_byte_ids(const nlohmann::json& config);
  void merge_word(std::string_view word, std::vector<std::int32_t>& ids) const;

  std::unordered_map<std::string, std::int32_t> vocab_;
  std::vector<const std::string*> tokens_by_id_;  // points into vocab_'s keys
  std::unordered_map<std::uint64_t, Merge> merges_;
  // The id of each byte's byte-level character; -1 where the vocabulary lacks it.
  std::array<std::int32_t, 256> byte_ids_{};
  std::optional<std::int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;  // Llama-3: a word that is itself a token skips merging
  std::unique_ptr<WordCache> cache_;
};

}  // namespace rlcore
