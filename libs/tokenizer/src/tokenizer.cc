// Tokenizer: reads tokenizer.json into its stages (normalizer, added tokens,
// pre-tokenizer, BPE model, post-processor, decoder) and runs them in HF's order.
// Byte-level files (GPT-2, Qwen, Llama 3) and SentencePiece-style ones
// (Llama 2, Mistral, Gemma) go through the same stages.
#include "rlcore/tokenizer/tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "added_vocab.h"
#include "bpe.h"
#include "byte_level.h"
#include "decoder.h"
#include "normalizer.h"
#include "post_processor.h"
#include "pre_tokenizer.h"
#include "utf8.h"

namespace rlcore {
namespace {

const nlohmann::json kNull;

const nlohmann::json& field(const nlohmann::json& root, const char* key) {
  const auto it = root.find(key);
  return it == root.end() ? kNull : *it;
}

const nlohmann::json& checked_root(const nlohmann::json& root) {
  if (!root.is_object()) throw FormatError("top level: expected a JSON object");
  // Both change what encode returns; silently ignoring them would be wrong.
  for (const char* key : {"truncation", "padding"}) {
    if (!field(root, key).is_null()) {
      throw FormatError(std::string(key) + ": not supported, set it to null (got " + field(root, key).dump() + ")");
    }
  }
  if (field(root, "model").is_null()) throw FormatError("model: missing");
  return root;
}

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw IoError(std::string("cannot read ") + what + " '" + path + "': " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw IoError(std::string("error reading ") + what + " '" + path + "'");
  return text.str();
}

nlohmann::json parse_json(std::string_view text, const std::string& source) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number too large for a double.
    throw FormatError(source + ": invalid JSON: " + e.what());
  }
}

// tokenizer_config.json writes a special token as a string or as an
// AddedToken object {"content": ...}; null means none.
std::string special_token_name(const nlohmann::json& config, const char* key, const std::string& source) {
  const nlohmann::json& value = field(config, key);
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && field(value, "content").is_string()) {
    return value["content"].get<std::string>();
  }
  throw FormatError(source + ": " + key + ": expected a string, {\"content\": ...} or null, got " + value.dump());
}

}  // namespace

class TokenizerImpl {
 public:
  TokenizerImpl(const nlohmann::json& root, const SpecialTokenNames& names)
      : normalizer_(Normalizer::from_json(field(checked_root(root), "normalizer"))),
        pre_tokenizer_(PreTokenizer::from_json(field(root, "pre_tokenizer"))),
        model_(BpeModel::from_json(field(root, "model"), pre_tokenizer_.byte_level())),
        added_(AddedVocabulary::from_json(
            field(root, "added_tokens"), normalizer_,
            [this](const std::string& token) { return model_.token_to_id(token); }, model_.size())),
        post_processor_(PostProcessor::from_json(field(root, "post_processor"))),
        decoder_(Decoder::from_json(field(root, "decoder"))),
        needs_origins_(pre_tokenizer_.needs_origins()) {
    check_consistent(root);
    build_id_tables();
    bos_ = resolve_name(names.bos, "bos");
    eos_ = resolve_name(names.eos, "eos");
    pad_ = resolve_name(names.pad, "pad");
  }

  std::vector<int32_t> encode(std::string_view text, bool parse_special) const {
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 2 + 1);
    const std::function<void(std::string_view)> encode_word = [&](std::string_view word) {
      model_.encode_word(word, ids);
    };
    // Where a byte of the normalized piece at hand starts in `text`; only
    // Metaspace's prepend_scheme "first" asks.
    struct {
      std::size_t raw_start = 0;      // of the raw segment in `text`
      std::size_t part_start = 0;     // of the part in the normalized segment
      std::vector<uint32_t> origins;  // by normalized byte, when a normalizer ran
    } where;
    const PreTokenizer::OriginOf origin_of = [&where](std::size_t offset) -> std::size_t {
      const std::size_t at = where.part_start + offset;
      return where.origins.empty() ? where.raw_start + at : where.origins[at];
    };
    std::vector<AddedVocabulary::Segment> raw;
    std::vector<AddedVocabulary::Segment> normalized;
    std::string normalized_text;
    added_.split(text, /*normalized_pass=*/false, parse_special, raw);
    for (const auto& segment : raw) {
      if (segment.id >= 0) {
        ids.push_back(segment.id);
        continue;
      }
      std::string_view piece = segment.text;
      where.raw_start = static_cast<std::size_t>(piece.data() - text.data());
      where.origins.clear();
      if (!normalizer_.is_identity()) {
        if (needs_origins_) {
          where.origins = char_starts(piece, where.raw_start);
          normalized_text = normalizer_.apply(piece, where.origins);
        } else {
          normalized_text = normalizer_.apply(piece);
        }
        piece = normalized_text;
      }
      normalized.clear();
      added_.split(piece, /*normalized_pass=*/true, parse_special, normalized);
      for (const auto& part : normalized) {
        if (part.id >= 0) {
          ids.push_back(part.id);
        } else {
          where.part_start = static_cast<std::size_t>(part.text.data() - piece.data());
          pre_tokenizer_.split(part.text, origin_of, encode_word);
        }
      }
    }
    return ids;
  }

  template <typename Id>
  std::string decode(const Id* ids, std::size_t count, bool skip_special, bool lossy) const {
    if (decoder_.is_byte_level()) {
      std::string out;
      for (std::size_t i = 0; i < count; ++i) {
        const int32_t id = checked_id(static_cast<int64_t>(ids[i]));
        if (skip_special && (kinds_[id] & kSkipped)) continue;
        out += bytes_[id];
      }
      return lossy ? utf8::replace_invalid(out) : out;
    }
    std::vector<std::string> tokens;
    tokens.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      const int32_t id = checked_id(static_cast<int64_t>(ids[i]));
      if (skip_special && (kinds_[id] & kSkipped)) continue;
      tokens.push_back(*tokens_[id]);
    }
    return decoder_.decode(std::move(tokens), lossy);
  }

  std::vector<std::string> pre_tokenize(std::string_view text) const {
    std::vector<std::string> words;
    pre_tokenizer_.split(
        text, [](std::size_t offset) { return offset; }, [&](std::string_view word) { words.emplace_back(word); });
    return words;
  }

  std::optional<int32_t> token_to_id(std::string_view token) const {
    const auto it = added_ids_.find(std::string(token));
    if (it != added_ids_.end()) return it->second;
    return model_.token_to_id(token);
  }

  std::string id_to_token(int32_t id) const { return *tokens_[checked_id(id)]; }

  std::vector<int32_t> post_process(std::vector<int32_t> ids) const { return post_processor_.apply(std::move(ids)); }
  int32_t vocab_size() const { return static_cast<int32_t>(kinds_.size()); }
  bool is_special(int32_t id) const { return id >= 0 && id < vocab_size() && (kinds_[id] & kSpecial); }
  std::optional<int32_t> bos() const { return bos_; }
  std::optional<int32_t> eos() const { return eos_; }
  std::optional<int32_t> pad() const { return pad_; }

 private:
  // kSkipped: decode(skip_special_tokens) leaves it out. HF decides by the
  // token's string, so a vocabulary token spelled like a special one goes too.
  enum Kind : uint8_t { kKnown = 1, kAdded = 2, kSpecial = 4, kSkipped = 8 };

  // The input offset each byte of `piece` starts at: its character's start.
  static std::vector<uint32_t> char_starts(std::string_view piece, std::size_t base) {
    std::vector<uint32_t> starts;
    starts.reserve(piece.size());
    for (std::size_t pos = 0; pos < piece.size();) {
      const std::size_t length = utf8::step(piece, pos).length;
      starts.insert(starts.end(), length, static_cast<uint32_t>(base + pos));
      pos += length;
    }
    return starts;
  }

  // Combinations HF would run but that would encode wrongly here, or that
  // make no sense together; each is refused by name.
  void check_consistent(const nlohmann::json& root) const {
    if (decoder_.has_byte_level() && !pre_tokenizer_.byte_level()) {
      throw FormatError(field(root, "pre_tokenizer").is_null()
                            ? "pre_tokenizer: missing; the ByteLevel decoder needs a ByteLevel pre-tokenizer"
                            : "pre_tokenizer: has no ByteLevel step; the ByteLevel decoder needs one, last");
    }
    if (needs_origins_ && normalizer_.has_nfc()) {
      throw FormatError(
          "pre_tokenizer: Metaspace with prepend_scheme \"first\" after an NFC normalizer "
          "is not supported");
    }
  }

  // Precomputes each id's token string, and for a ByteLevel decoder its bytes,
  // so decode is a table lookup per id.
  void build_id_tables() {
    int32_t max_id = model_.max_id();
    for (const AddedToken& token : added_.tokens()) max_id = std::max(max_id, token.id);
    tokens_.assign(static_cast<std::size_t>(max_id + 1), nullptr);
    kinds_.assign(static_cast<std::size_t>(max_id + 1), 0);
    for (int32_t id = 0; id <= model_.max_id(); ++id) {
      tokens_[id] = model_.id_to_token(id);
      if (tokens_[id] != nullptr) kinds_[id] = kKnown;
    }
    for (const AddedToken& token : added_.tokens()) {
      // HF looks an id up among the added tokens first.
      tokens_[token.id] = &token.content;
      kinds_[token.id] = kKnown | kAdded | (token.special ? kSpecial : 0);
      added_ids_.emplace(token.content, token.id);
    }
    for (std::size_t id = 0; id < tokens_.size(); ++id) {
      if (tokens_[id] != nullptr && added_.is_special_content(*tokens_[id])) kinds_[id] |= kSkipped;
    }
    if (!decoder_.is_byte_level()) return;
    bytes_.assign(tokens_.size(), std::string());
    for (std::size_t id = 0; id < tokens_.size(); ++id) {
      // HF's ByteLevel decoder keeps a token with a non-byte character as its UTF-8.
      if (tokens_[id] != nullptr && !byte_level::decode(*tokens_[id], bytes_[id])) bytes_[id] = *tokens_[id];
    }
  }

  std::optional<int32_t> resolve_name(const std::string& name, const char* role) const {
    if (name.empty()) return std::nullopt;
    const auto id = token_to_id(name);
    if (!id) throw ValueError(std::string(role) + " token \"" + name + "\" is not in the vocabulary");
    return id;
  }

  int32_t checked_id(int64_t id) const {
    if (id < 0 || id >= vocab_size() || kinds_[id] == 0) {
      throw ValueError("token id " + std::to_string(id) + " is not in the vocabulary (size " +
                       std::to_string(vocab_size()) + ")");
    }
    return static_cast<int32_t>(id);
  }

  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  BpeModel model_;
  AddedVocabulary added_;
  PostProcessor post_processor_;
  Decoder decoder_;
  bool needs_origins_;
  std::vector<const std::string*> tokens_;  // by id; into model_ and added_; null where none
  std::vector<std::string> bytes_;          // by id, for a ByteLevel decoder
  std::vector<uint8_t> kinds_;              // by id; 0 where no token has the id
  std::unordered_map<std::string, int32_t> added_ids_;
  std::optional<int32_t> bos_;
  std::optional<int32_t> eos_;
  std::optional<int32_t> pad_;
};

namespace {

std::shared_ptr<const TokenizerImpl> load(std::string_view json_text, const std::string& source,
                                          const SpecialTokenNames& names) {
  const nlohmann::json root = parse_json(json_text, source);
  try {
    return std::make_shared<const TokenizerImpl>(root, names);
  } catch (const FormatError& e) {
    throw FormatError(source + ": " + e.what());
  } catch (const ValueError& e) {
    throw ValueError(source + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    // A value of the wrong JSON type somewhere the checks above did not reach.
    throw FormatError(source + ": " + e.what());
  }
}

}  // namespace

Tokenizer::Tokenizer(std::shared_ptr<const TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(const Tokenizer&) = default;
Tokenizer& Tokenizer::operator=(const Tokenizer&) = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Tokenizer Tokenizer::from_file(const std::string& path, const SpecialTokenNames& names) {
  return Tokenizer(load(read_file(path, "tokenizer file"), "tokenizer file '" + path + "'", names));
}

Tokenizer Tokenizer::from_json(std::string_view json_text, const SpecialTokenNames& names) {
  return Tokenizer(load(json_text, "tokenizer JSON", names));
}

Tokenizer Tokenizer::from_pretrained_dir(const std::string& dir) {
  const std::filesystem::path base(dir);
  const std::string config_path = (base / "tokenizer_config.json").string();
  SpecialTokenNames names;
  if (std::filesystem::exists(config_path)) {
    const std::string source = "tokenizer config '" + config_path + "'";
    const nlohmann::json config = parse_json(read_file(config_path, "tokenizer config"), source);
    if (!config.is_object()) throw FormatError(source + ": expected a JSON object");
    names.bos = special_token_name(config, "bos_token", source);
    names.eos = special_token_name(config, "eos_token", source);
    names.pad = special_token_name(config, "pad_token", source);
  }
  return from_file((base / "tokenizer.json").string(), names);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special_tokens) const {
  return impl_->encode(text, parse_special_tokens);
}

std::vector<int32_t> Tokenizer::post_process(std::vector<int32_t> ids) const {
  return impl_->post_process(std::move(ids));
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  return impl_->decode(ids.data(), ids.size(), skip_special_tokens, /*lossy=*/false);
}

std::string Tokenizer::decode(const int64_t* ids, std::size_t count, bool skip_special_tokens) const {
  return impl_->decode(ids, count, skip_special_tokens, /*lossy=*/false);
}

std::string Tokenizer::decode_lossy(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  return impl_->decode(ids.data(), ids.size(), skip_special_tokens, /*lossy=*/true);
}

std::string Tokenizer::decode_lossy(const int64_t* ids, std::size_t count, bool skip_special_tokens) const {
  return impl_->decode(ids, count, skip_special_tokens, /*lossy=*/true);
}

std::vector<std::string> Tokenizer::pre_tokenize(std::string_view text) const { return impl_->pre_tokenize(text); }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const { return impl_->token_to_id(token); }

std::string Tokenizer::id_to_token(int32_t id) const { return impl_->id_to_token(id); }
int32_t Tokenizer::vocab_size() const { return impl_->vocab_size(); }
bool Tokenizer::is_special_token(int32_t id) const { return impl_->is_special(id); }
std::optional<int32_t> Tokenizer::bos_token_id() const { return impl_->bos(); }
std::optional<int32_t> Tokenizer::eos_token_id() const { return impl_->eos(); }
std::optional<int32_t> Tokenizer::pad_token_id() const { return impl_->pad(); }

}  // namespace rlcore
