// Tokenizer: BPE loaded from a Hugging Face tokenizer.json, byte-level (GPT-2,
// Qwen2/3, Llama 3) or SentencePiece-style (Llama 2, Mistral, Gemma), giving
// the ids and text HF tokenizers 0.23 gives; plus the small built-in
// tokenizer of the project's own tasks. docs/checkpoints.md lists the
// tokenizer.json components it reads; any other is refused by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rlcore {

class TokenizerImpl;

// Which tokens play bos/eos/pad. tokenizer.json does not say; HF keeps these
// names in tokenizer_config.json. Empty means the tokenizer has none.
struct SpecialTokenNames {
  std::string bos;
  std::string eos;
  std::string pad;
};

// Immutable once loaded and cheap to copy (copies share state); every const
// member is safe to call from many threads at once.
class Tokenizer {
 public:
  // Throw IoError when the file cannot be read, FormatError naming the field
  // (and the file) for bad or unsupported JSON, e.g. "pre_tokenizer.type:
  // unsupported pre-tokenizer \"Whitespace\"", ValueError when a name in
  // `names` is not a token. Added tokens get the ids HF gives them (the
  // model's id for a token it has, else the next from its size on).
  static Tokenizer from_file(const std::string& path, const SpecialTokenNames& names = {});
  static Tokenizer from_json(std::string_view json_text, const SpecialTokenNames& names = {});
  // Reads <dir>/tokenizer.json and, when present, bos/eos/pad_token from
  // <dir>/tokenizer_config.json.
  static Tokenizer from_pretrained_dir(const std::string& dir);

  ~Tokenizer();
  Tokenizer(const Tokenizer&);
  Tokenizer& operator=(const Tokenizer&);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Like HF's encode(text, add_special_tokens=False).ids: the post_processor
  // is not run. Any bytes are accepted, invalid UTF-8 included: where HF would
  // see a character, an invalid byte is one no token has (byte-level files
  // spell it as any byte; SentencePiece-style ones use byte_fallback or
  // unk_token). With parse_special_tokens false, special added tokens in
  // `text` are encoded as plain text (HF's encode_special_tokens); other
  // added tokens still match.
  // Byte-level: decode() gives the bytes back exactly (unless an NFC
  // normalizer changed the text). SentencePiece-style: decode() gives what
  // the decoders make of the tokens, as HF (a leading space, or U+2581 in the
  // text, may come back changed), byte tokens as their bytes.
  std::vector<int32_t> encode(std::string_view text, bool parse_special_tokens = true) const;

  // Adds what the post_processor's TemplateProcessing puts around one sequence
  // (e.g. Llama 2's <s>, Llama 3's <|begin_of_text|>); returns `ids` unchanged
  // when there is none. post_process(encode(text)) is HF's encode(text).ids.
  std::vector<int32_t> post_process(std::vector<int32_t> ids) const;

  // The text the ids stand for, through the file's decoder, with bytes that
  // are not UTF-8 kept as they are (a token cut inside a character gives its
  // bytes). skip_special_tokens leaves out every token spelled like a special
  // added token, as HF does. Throw ValueError for an id outside the vocabulary.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;
  std::string decode(const int64_t* ids, std::size_t count, bool skip_special_tokens = false) const;
  // HF's decode(ids, skip_special_tokens) exactly: bytes that are not UTF-8
  // become U+FFFD where HF's decoders put it (ByteLevel: per ill-formed
  // sequence; ByteFallback: one per byte of a run of byte tokens that is not
  // UTF-8 as a whole). Always valid UTF-8.
  std::string decode_lossy(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;
  std::string decode_lossy(const int64_t* ids, std::size_t count, bool skip_special_tokens = false) const;

  // The words the pre_tokenizer cuts `text` into (no normalizer, no added
  // tokens): what BPE then merges within, byte-level words as raw bytes,
  // Metaspace's with their U+2581. For inspection and tests.
  std::vector<std::string> pre_tokenize(std::string_view text) const;

  // Token strings are as stored in the vocabulary (byte-level: "Ġhello",
  // SentencePiece-style: "▁hello", "<0x0A>");
  // added tokens first, then the model's vocabulary.
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // Throws ValueError for an id outside the vocabulary.
  std::string id_to_token(int32_t id) const;
  // Largest id + 1: the rows an embedding table needs.
  int32_t vocab_size() const;
  bool is_special_token(int32_t id) const;

  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;
  std::optional<int32_t> pad_token_id() const;

 private:
  explicit Tokenizer(std::shared_ptr<const TokenizerImpl> impl);

  std::shared_ptr<const TokenizerImpl> impl_;
};

// tokenizer.json text (HF format, so the one loader serves both) of the
// tokenizer for the built-in tasks: the 256 byte tokens, merges for a few task
// words ("Question", "Answer", "####", chat roles, " +", ...) and the special
// tokens <|endoftext|>, <|im_start|>, <|im_end|>. No merge touches a digit,
// so numbers are always encoded digit by digit.
std::string make_builtin_tokenizer_json();

// The built-in tokenizer with eos <|im_end|> and pad <|endoftext|> (as Qwen2-Instruct).
Tokenizer make_builtin_tokenizer();

}  // namespace rlcore
