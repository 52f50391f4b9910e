// Loads added tokens and splits text on them the way HF's AddedVocabulary does
// (leftmost-longest, with single_word / lstrip / rstrip).
#include "added_vocab.h"

#include <unordered_map>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "utf8.h"

namespace rlcore {
namespace {

bool flag(const nlohmann::json& entry, const char* key, bool fallback, const std::string& where) {
  const auto it = entry.find(key);
  if (it == entry.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw FormatError(where + "." + key + ": expected true or false");
  return it->get<bool>();
}

AddedToken parse_token(const nlohmann::json& entry, const std::string& where) {
  if (!entry.is_object()) throw FormatError(where + ": expected an object");
  AddedToken token;
  const auto id = entry.find("id");
  if (id == entry.end() || !id->is_number_integer() || id->get<std::int64_t>() < 0 ||
      id->get<std::int64_t>() > INT32_MAX) {
    throw FormatError(where + ".id: missing or not a non-negative 32-bit integer");
  }
  token.id = id->get<std::int32_t>();
  const auto content = entry.find("content");
  if (content == entry.end() || !content->is_string()) {
    throw FormatError(where + ".content: missing; expected a string");
  }
  token.content = content->get<std::string>();
  token.special = flag(entry, "special", false, where);
  token.single_word = flag(entry, "single_word", false, where);
  token.lstrip = flag(entry, "lstrip", false, where);
  token.rstrip = flag(entry, "rstrip", false, where);
  // HF's AddedToken default: special tokens are matched in raw text.
  token.normalized = flag(entry, "normalized", !token.special, where);
  return token;
}

// The start of the character that ends just before `pos`, and that character.
std::pair<std::size_t, utf8::Step> char_before(std::string_view text, std::size_t pos) {
  std::size_t begin = pos - 1;
  while (begin > 0 && pos - begin < 4 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) {
    --begin;
  }
  utf8::Step s = utf8::step(text, begin);
  if (begin + s.length != pos) {
    // The bytes before pos do not end a well-formed character: treat the last one alone.
    return {pos - 1, utf8::Step{1, false, 0}};
  }
  return {begin, s};
}

}  // namespace

void TokenTrie::insert(std::string_view key, std::int32_t value) {
  std::size_t node = 0;
  for (char ch : key) {
    const auto byte = static_cast<unsigned char>(ch);
    std::int32_t child = -1;
    for (const auto& [b, index] : nodes_[node].children) {
      if (b == byte) child = index;
    }
    if (child < 0) {
      child = static_cast<std::int32_t>(nodes_.size());
      nodes_[node].children.emplace_back(byte, child);
      nodes_.emplace_back();
    }
    node = static_cast<std::size_t>(child);
  }
  nodes_[node].value = value;
  starts_key_[static_cast<unsigned char>(key.front())] = true;
}

std::pair<std::size_t, std::int32_t> TokenTrie::longest_at(std::string_view text, std::size_t pos) const {
  std::pair<std::size_t, std::int32_t> best{0, -1};
  if (!starts_key_[static_cast<unsigned char>(text[pos])]) return best;
  std::size_t node = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    std::int32_t child = -1;
    for (const auto& [b, index] : nodes_[node].children) {
      if (b == byte) child = index;
    }
    if (child < 0) break;
    node = static_cast<std::size_t>(child);
    if (nodes_[node].value >= 0) best = {i + 1 - pos, nodes_[node].value};
  }
  return best;
}

// HF reads the entries through AddedVocabulary::add_tokens, which ignores
// their "id": a token whose content is in the model's vocabulary takes that
// id, the others take the next ids from the vocabulary's size on, and a
// repeated content takes its first id and its last properties.
AddedVocabulary AddedVocabulary::from_json(const nlohmann::json& config, const Normalizer& normalizer,
                                           const ModelIds& model_id, std::int32_t model_vocab_size) {
  AddedVocabulary result;
  if (config.is_null()) return result;
  if (!config.is_array()) throw FormatError("added_tokens: expected a list");
  std::unordered_map<std::string, std::size_t> index_of;  // content -> tokens_ index
  std::unordered_map<std::int32_t, std::size_t> index_of_id;
  std::int32_t next_id = model_vocab_size;
  for (std::size_t i = 0; i < config.size(); ++i) {
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    AddedToken token = parse_token(config[i], where);
    const std::int32_t listed_id = token.id;
    if (token.content.empty()) continue;  // HF skips these
    if (token.special) result.special_contents_.insert(token.content);
    const auto seen = index_of.find(token.content);
    if (seen != index_of.end()) {
      token.id = result.tokens_[seen->second].id;
      result.tokens_[seen->second] = std::move(token);
      continue;
    }
    token.id = model_id(token.content).value_or(next_id);
    if (token.id == next_id) ++next_id;
    if (index_of_id.count(token.id)) {
      throw FormatError(where + ": \"" + token.content + "\" would get id " + std::to_string(token.id) + " (listed " +
                        std::to_string(listed_id) + "), which an earlier added token has");
    }
    index_of.emplace(token.content, result.tokens_.size());
    index_of_id.emplace(token.id, result.tokens_.size());
    result.tokens_.push_back(std::move(token));
  }
  bool any_single_word = false;
  for (std::size_t index = 0; index < result.tokens_.size(); ++index) {
    const AddedToken& token = result.tokens_[index];
    if (token.normalized) {
      const std::string key = normalizer.apply(token.content);
      if (!key.empty()) result.normalized_trie_.insert(key, static_cast<std::int32_t>(index));
    } else {
      result.raw_trie_.insert(token.content, static_cast<std::int32_t>(index));
    }
    any_single_word = any_single_word || token.single_word;
  }
  if (any_single_word) result.word_char_ = std::make_unique<Regex>("\\w", false, "\\w");
  return result;
}

// HF's single_word: no word character right before or right after the match.
bool AddedVocabulary::single_word_ok(std::string_view text, std::size_t begin, std::size_t end) const {
  if (begin > 0) {
    const auto [start, s] = char_before(text, begin);
    if (s.valid && word_char_->matches_whole(text.substr(start, s.length))) return false;
  }
  if (end < text.size()) {
    const utf8::Step s = utf8::step(text, end);
    if (s.valid && word_char_->matches_whole(text.substr(end, s.length))) return false;
  }
  return true;
}

void AddedVocabulary::split(std::string_view text, bool normalized_pass, bool parse_special,
                            std::vector<Segment>& out) const {
  const TokenTrie& trie = normalized_pass ? normalized_trie_ : raw_trie_;
  std::size_t piece_start = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const auto [length, index] = trie.longest_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[static_cast<std::size_t>(index)];
    std::size_t begin = pos;
    std::size_t end = pos + length;
    pos = end;
    if ((token.special && !parse_special) || (token.single_word && !single_word_ok(text, begin, end))) {
      continue;  // the match still consumed its bytes, as in HF
    }
    while (token.lstrip && begin > piece_start) {
      const auto [start, s] = char_before(text, begin);
      if (!s.valid || !utf8::is_whitespace(s.code_point) || start < piece_start) break;
      begin = start;
    }
    while (token.rstrip && end < text.size()) {
      const utf8::Step s = utf8::step(text, end);
      if (!s.valid || !utf8::is_whitespace(s.code_point)) break;
      end += s.length;
    }
    if (begin > piece_start) out.push_back({text.substr(piece_start, begin - piece_start), -1});
    out.push_back({text.substr(begin, end - begin), token.id});
    piece_start = pos = end;
  }
  if (piece_start < text.size()) out.push_back({text.substr(piece_start), -1});
}

}  // namespace rlcore
