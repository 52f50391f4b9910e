// BPE: loads vocab and merges from tokenizer.json's "model" and merges words
// the way HF's BPE::merge_word does (symbols from characters, byte_fallback,
// unk_token and fuse_unk; then lowest rank first, leftmost on ties), with a
// bounded per-word cache.
#include "bpe.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <queue>
#include <shared_mutex>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "byte_level.h"
#include "utf8.h"

namespace rlcore {

// Words seen before skip the merge loop. Like HF's cache it never blocks:
// a lookup or store that would wait on the lock is simply skipped.
class WordCache {
 public:
  static constexpr std::size_t kCapacity = 10000;  // HF's DEFAULT_CACHE_CAPACITY
  static constexpr std::size_t kMaxWordBytes = 256;

  bool append_cached(std::string_view word, std::vector<std::int32_t>& ids) const {
    std::shared_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    const auto it = map_.find(std::string(word));
    if (it == map_.end()) return false;
    ids.insert(ids.end(), it->second.begin(), it->second.end());
    return true;
  }

  void store(std::string_view word, const std::int32_t* ids, std::size_t count) {
    if (word.size() > kMaxWordBytes) return;
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock() || map_.size() >= kCapacity) return;
    map_.emplace(std::string(word), std::vector<std::int32_t>(ids, ids + count));
  }

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::vector<std::int32_t>> map_;
};

namespace {

std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

// The (left, right) of a merge in either format HF writes: "a b" or ["a", "b"].
std::pair<std::string, std::string> merge_parts(const nlohmann::json& merge, const std::string& where) {
  if (merge.is_string()) {
    const auto& text = merge.get_ref<const std::string&>();
    const auto space = text.find(' ');
    if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
      throw FormatError(where + " (" + in_quotes(text) + "): expected two tokens separated by one space");
    }
    return {text.substr(0, space), text.substr(space + 1)};
  }
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
    return {merge[0].get<std::string>(), merge[1].get<std::string>()};
  }
  throw FormatError(where + ": expected \"left right\" or [\"left\", \"right\"], got " + merge.dump());
}

bool is_absent_or_empty(const nlohmann::json& config, const char* key) {
  const auto it = config.find(key);
  return it == config.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty());
}

bool flag(const nlohmann::json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return false;
  if (!it->is_boolean()) throw FormatError(std::string("model.") + key + ": expected true or false");
  return it->get<bool>();
}

void check_supported(const nlohmann::json& config) {
  if (!config.is_object()) throw FormatError("model: missing; expected a BPE model object");
  const auto type = config.find("type");
  // Files from old tokenizers versions omit the type of a BPE model.
  if (type != config.end() && *type != "BPE") {
    throw FormatError("model.type: unsupported model " + type->dump() + " (supported: \"BPE\")");
  }
  const auto dropout = config.find("dropout");
  if (dropout != config.end() && !dropout->is_null() && !(dropout->is_number() && dropout->get<double>() == 0.0)) {
    throw FormatError("model.dropout: BPE dropout is not supported, got " + dropout->dump());
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!is_absent_or_empty(config, key)) {
      throw FormatError(std::string("model.") + key + ": not supported, got " + config[key].dump());
    }
  }
}

}  // namespace

BpeModel::BpeModel() : cache_(std::make_unique<WordCache>()) {}
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;
BpeModel::~BpeModel() = default;

BpeModel BpeModel::from_json(const nlohmann::json& config, bool byte_level) {
  check_supported(config);
  BpeModel model;
  model.byte_level_ = byte_level;
  const auto vocab = config.find("vocab");
  if (vocab == config.end() || !vocab->is_object()) {
    throw FormatError("model.vocab: missing; expected an object of token -> id");
  }
  model.parse_vocab(*vocab);
  const auto merges = config.find("merges");
  if (merges == config.end() || !merges->is_array()) {
    throw FormatError("model.merges: missing; expected a list");
  }
  model.parse_merges(*merges);
  model.fuse_unk_ = flag(config, "fuse_unk");
  model.ignore_merges_ = flag(config, "ignore_merges");
  model.resolve_symbol_ids(config);
  return model;
}

void BpeModel::parse_vocab(const nlohmann::json& vocab) {
  vocab_.reserve(vocab.size());
  std::int32_t max_id = -1;
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > kMaxId) {
      throw FormatError("model.vocab[" + in_quotes(token) + "]: id " + id.dump() + " is not an integer in [0, " +
                        std::to_string(kMaxId) + "]");
    }
    const auto value = id.get<std::int32_t>();
    vocab_.emplace(token, value);
    max_id = std::max(max_id, value);
  }
  tokens_by_id_.assign(static_cast<std::size_t>(max_id + 1), nullptr);
  for (const auto& [token, id] : vocab_) {
    // Two tokens sharing an id: keep the first in key order, deterministically.
    const std::string*& slot = tokens_by_id_[static_cast<std::size_t>(id)];
    if (slot == nullptr || token < *slot) slot = &token;
  }
}

void BpeModel::parse_merges(const nlohmann::json& merges) {
  merges_.reserve(merges.size());
  std::int32_t rank = 0;
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const std::string where = "model.merges[" + std::to_string(i) + "]";
    // merges.txt headers sometimes survive conversion; HF skips them before ranking.
    if (merges[i].is_string() && merges[i].get_ref<const std::string&>().rfind("#version", 0) == 0) {
      continue;
    }
    const auto [left, right] = merge_parts(merges[i], where);
    const std::string shown = " (" + in_quotes(left + " " + right) + ")";
    const auto left_id = token_to_id(left);
    const auto right_id = token_to_id(right);
    if (!left_id || !right_id) {
      throw FormatError(where + shown + ": token " + in_quotes(left_id ? right : left) + " is not in model.vocab");
    }
    const auto new_id = token_to_id(left + right);
    if (!new_id) {
      throw FormatError(where + shown + ": merged token " + in_quotes(left + right) + " is not in model.vocab");
    }
    // A repeated pair takes its last rank, as HF's HashMap collect does.
    merges_[pair_key(*left_id, *right_id)] = Merge{rank++, *new_id};
  }
}

void BpeModel::resolve_symbol_ids(const nlohmann::json& config) {
  const auto unk = config.find("unk_token");
  if (unk != config.end() && !unk->is_null()) {
    if (!unk->is_string() || !token_to_id(unk->get<std::string>())) {
      throw FormatError("model.unk_token: " + unk->dump() + " is not in model.vocab");
    }
    unk_id_ = token_to_id(unk->get<std::string>());
  }
  byte_fallback_ = flag(config, "byte_fallback");
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    fallback_ids_[b] = byte_fallback_ ? token_to_id(name).value_or(-1) : -1;
  }
  if (!byte_level_) {
    ascii_ids_.fill(-1);
    for (const auto& [token, id] : vocab_) {
      if (token.empty()) continue;
      const utf8::Step s = utf8::step(token, 0);
      if (!s.valid || s.length != token.size()) continue;
      if (s.code_point < 0x80) {
        ascii_ids_[s.code_point] = id;
      } else {
        char_ids_.emplace(s.code_point, id);
      }
    }
    return;
  }
  for (int b = 0; b < 256; ++b) {
    const std::string& ch = byte_level::byte_to_utf8(static_cast<std::uint8_t>(b));
    byte_ids_[b] = token_to_id(ch).value_or(-1);
    if (byte_ids_[b] >= 0 || unk_id_) continue;
    bool fallback = byte_fallback_;
    for (unsigned char c : ch) fallback = fallback && fallback_ids_[c] >= 0;
    if (fallback) continue;
    // HF would drop the byte without a word; a byte-level file lacking one is broken.
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02X", b);
    throw FormatError("model.vocab: lacks " + in_quotes(ch) + ", the token of byte " + hex +
                      "; byte-level BPE without an unk_token or byte_fallback tokens needs all "
                      "256 byte tokens");
  }
}

std::int32_t BpeModel::symbol_id(std::string_view symbol) const {
  if (byte_level_) return byte_ids_[static_cast<std::uint8_t>(symbol[0])];
  const utf8::Step s = utf8::step(symbol, 0);
  if (!s.valid) return -1;
  if (s.code_point < 0x80) return ascii_ids_[s.code_point];
  const auto it = char_ids_.find(s.code_point);
  return it == char_ids_.end() ? -1 : it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<std::int32_t>& ids) const {
  if (word.empty()) return;
  if (byte_level_ && word.size() == 1 && byte_ids_[static_cast<std::uint8_t>(word[0])] >= 0) {
    ids.push_back(byte_ids_[static_cast<std::uint8_t>(word[0])]);
    return;
  }
  if (ignore_merges_) {
    if (const auto id = token_to_id(byte_level_ ? byte_level::encode(word) : std::string(word))) {
      ids.push_back(*id);
      return;
    }
  }
  if (cache_->append_cached(word, ids)) return;
  const std::size_t first = ids.size();
  merge_word(word, ids);
  cache_->store(word, ids.data() + first, ids.size() - first);
}

void BpeModel::merge_word(std::string_view word, std::vector<std::int32_t>& ids) const {
  struct Symbol {
    std::int32_t id;
    std::int32_t prev;
    std::int32_t next;
    bool alive;
  };
  struct Candidate {
    std::int32_t rank;
    std::int32_t pos;
    std::int32_t new_id;
    // Inverted so std::priority_queue pops the lowest rank, then the leftmost.
    bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };

  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  const auto add = [&](std::int32_t id) {
    const auto pos = static_cast<std::int32_t>(symbols.size());
    symbols.push_back({id, pos - 1, -1, true});
    if (pos > 0) symbols[pos - 1].next = pos;
  };
  // As HF: an unknown symbol becomes unk_token, which waits until the next
  // known symbol (or the end) so that fuse_unk can grow it; byte_fallback
  // tokens do not end the wait.
  bool unk_pending = false;
  for (std::size_t pos = 0; pos < word.size();) {
    const std::size_t length = byte_level_ ? 1 : utf8::step(word, pos).length;
    const std::string_view symbol = word.substr(pos, length);
    pos += length;
    const std::int32_t id = symbol_id(symbol);
    if (id >= 0) {
      if (unk_pending) add(*unk_id_);
      unk_pending = false;
      add(id);
      continue;
    }
    if (byte_fallback_) {
      const std::string_view spelled =
          byte_level_ ? std::string_view(byte_level::byte_to_utf8(static_cast<std::uint8_t>(symbol[0]))) : symbol;
      bool all = true;
      for (unsigned char c : spelled) all = all && fallback_ids_[c] >= 0;
      if (all) {
        for (unsigned char c : spelled) add(fallback_ids_[c]);
        continue;
      }
    }
    if (!unk_id_) continue;  // HF drops a symbol it has no token for
    if (unk_pending && !fuse_unk_) add(*unk_id_);
    unk_pending = true;
  }
  if (unk_pending) add(*unk_id_);
  if (symbols.empty()) return;

  std::priority_queue<Candidate> queue;
  const auto offer = [&](std::int32_t pos) {
    const Symbol& left = symbols[pos];
    if (left.next < 0) return;
    const auto it = merges_.find(pair_key(left.id, symbols[left.next].id));
    if (it != merges_.end()) queue.push({it->second.rank, pos, it->second.new_id});
  };
  for (std::int32_t pos = 0; pos + 1 < static_cast<std::int32_t>(symbols.size()); ++pos) offer(pos);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    // The entry is stale when either side has merged since it was queued.
    const auto it = merges_.find(pair_key(left.id, symbols[left.next].id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;
    Symbol& right = symbols[left.next];
    right.alive = false;
    left.id = top.new_id;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) offer(left.prev);
    offer(top.pos);
  }

  for (std::int32_t pos = 0; pos >= 0; pos = symbols[pos].next) ids.push_back(symbols[pos].id);
}

std::optional<std::int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(std::int32_t id) const {
  if (id < 0 || id > max_id()) return nullptr;
  return tokens_by_id_[static_cast<std::size_t>(id)];
}

}  // namespace rlcore
