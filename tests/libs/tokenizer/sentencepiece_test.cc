// SentencePiece-style tokenizer.json (Llama 2, Mistral, Gemma) on a small
// vocabulary, ids worked out by hand: Prepend/Replace normalizers, Metaspace,
// byte fallback, unk_token and fuse_unk, the decoders, HF's ids for added
// tokens, empty regex matches, and the errors that name what is unsupported.
// The expectations HF can compute were checked against tokenizers 0.23;
// tokenizer_hf_test.cc holds the same features to it on real files.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "rlcore/tokenizer/tokenizer.h"

using rlcore::Tokenizer;
using Ids = std::vector<int32_t>;
using Words = std::vector<std::string>;
using nlohmann::json;

namespace {

const std::string kSpace = "\xE2\x96\x81";        // U+2581, SentencePiece's space
const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Ids: <unk> 0, <s> 1, </s> 2, <0x00>..<0xFF> 3..258, then the characters and
// the merges below, in order.
constexpr int32_t kUnk = 0;
constexpr int32_t kBos = 1;
int32_t byte_token(int b) { return 3 + b; }
const std::vector<std::string> kChars = {kSpace, "a", "b", "e", "h", "l", "o", "x", "-", "\xD1\x88" /* ш */};
int32_t char_id(const std::string& c) {
  for (std::size_t i = 0; i < kChars.size(); ++i) {
    if (kChars[i] == c) return static_cast<int32_t>(259 + i);
  }
  throw std::logic_error("no such character " + c);
}
// ▁h, lo, ▁he, ▁hel, ▁hello (ranks 0..4).
const std::vector<std::pair<std::string, std::string>> kMerges = {
    {kSpace, "h"}, {"l", "o"}, {kSpace + "h", "e"}, {kSpace + "he", "l"}, {kSpace + "hel", "lo"}};
int32_t merged_id(std::size_t rank) { return static_cast<int32_t>(259 + kChars.size() + rank); }
const int32_t kHello = merged_id(4);  // ▁hello
const int32_t kLo = merged_id(1);

json replace(const std::string& pattern, const std::string& content, const char* kind = "String") {
  return {{"type", "Replace"}, {"pattern", {{kind, pattern}}}, {"content", content}};
}

json metaspace(const std::string& scheme, bool split) {
  return {{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", scheme}, {"split", split}};
}

// Llama 2's layout: Prepend + Replace normalizer, no pre-tokenizer, byte
// fallback, the Replace/ByteFallback/Fuse/Strip decoder and a BOS template.
json llama2_style() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = byte_token(b);
  }
  for (const std::string& c : kChars) vocab[c] = char_id(c);
  json merges = json::array();
  for (std::size_t rank = 0; rank < kMerges.size(); ++rank) {
    merges.push_back(kMerges[rank].first + " " + kMerges[rank].second);
    vocab[kMerges[rank].first + kMerges[rank].second] = merged_id(rank);
  }
  json added = json::array();
  for (const char* special : {"<unk>", "<s>", "</s>"}) {
    added.push_back({{"id", vocab[special]},
                     {"content", special},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer",
       {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", kSpace}}, replace(" ", kSpace)}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair", json::array()},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {kBos}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {replace(kSpace, " "),
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", "<unk>"},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merges}}},
  };
}

// Mistral v0.3's layout: no normalizer, Metaspace in the pre-tokenizer and decoder.
json metaspace_style(const std::string& scheme, bool split) {
  json tok = llama2_style();
  tok["normalizer"] = nullptr;
  tok["pre_tokenizer"] = metaspace(scheme, split);
  tok["decoder"] = metaspace(scheme, split);
  return tok;
}

Tokenizer load(const json& tok) { return Tokenizer::from_json(tok.dump()); }

std::string load_error_of(const json& tok) {
  try {
    load(tok);
  } catch (const rlcore::FormatError& e) {
    return e.what();
  }
  return "no FormatError";
}

Ids with_bytes(Ids ids, const std::string& bytes) {
  for (unsigned char b : bytes) ids.push_back(byte_token(b));
  return ids;
}

}  // namespace

TEST_CASE("Llama 2 layout: every piece gets the prefix, no merge crosses a space", "[tokenizer]") {
  const Tokenizer tok = load(llama2_style());
  CHECK(tok.encode("hello") == Ids{kHello});
  CHECK(tok.encode("hello hello") == Ids{kHello, kHello});
  // The normalizer runs on each piece between special tokens, so "hello"
  // after <s> gets its own prefix.
  CHECK(tok.encode("<s>hello") == Ids{kBos, kHello});
  CHECK(tok.encode(" hello") == Ids{char_id(kSpace), kHello});
  CHECK(tok.encode("") == Ids{});
  CHECK(tok.post_process(tok.encode("hello")) == Ids{kBos, kHello});
  CHECK(tok.id_to_token(kHello) == kSpace + "hello");
  CHECK(tok.token_to_id("<0x0A>") == byte_token('\n'));
  // Strip removes the prefix's space, which only leads when no token comes before.
  CHECK(tok.decode(Ids{kHello, kHello}) == "hello hello");
  CHECK(tok.decode(Ids{kBos, kHello}) == "<s> hello");
  CHECK(tok.decode(Ids{kBos, kHello}, /*skip_special_tokens=*/true) == "hello");
  CHECK(tok.decode(tok.encode(" hello")) == " hello");
}

TEST_CASE("byte fallback spells what the vocabulary lacks in <0xNN> tokens", "[tokenizer]") {
  const Tokenizer tok = load(llama2_style());
  CHECK(tok.encode("h\xC3\xA9") == with_bytes(Ids{merged_id(0)}, "\xC3\xA9"));  // ▁h, then é's bytes
  CHECK(tok.encode("\xD1\x88") == Ids{char_id(kSpace), char_id("\xD1\x88")});   // ш is in the vocabulary
  CHECK(tok.decode(tok.encode("h\xC3\xA9")) == "h\xC3\xA9");
  // Invalid UTF-8 goes in as byte tokens and comes back out exactly.
  const std::string invalid =
      "a\xFF"
      "b\xE4\xB8";
  const Ids ids = tok.encode(invalid);
  CHECK(ids == Ids{char_id(kSpace), char_id("a"), byte_token(0xFF), char_id("b"), byte_token(0xE4), byte_token(0xB8)});
  CHECK(tok.decode(ids) == invalid);
  // HF's ByteFallback decodes a run of byte tokens whole: one U+FFFD per byte
  // unless the run is UTF-8, even where a prefix of it would be.
  CHECK(tok.decode_lossy(ids) == "a" + kReplacement + "b" + kReplacement + kReplacement);
  CHECK(tok.decode_lossy(with_bytes({}, "\xE4\xB8\x96")) == "\xE4\xB8\x96");
  CHECK(tok.decode_lossy(with_bytes({}, "\xE4\xB8\x96\x80")) ==
        kReplacement + kReplacement + kReplacement + kReplacement);
  CHECK(tok.decode(with_bytes({}, "\xE4\xB8\x96\x80")) == "\xE4\xB8\x96\x80");
}

TEST_CASE("unk_token: one per unknown character, or fused, as HF orders them", "[tokenizer]") {
  json tok = llama2_style();
  tok["model"]["byte_fallback"] = false;
  tok["model"]["fuse_unk"] = false;
  const Ids two_unks = {char_id(kSpace), char_id("a"), kUnk, kUnk, char_id("b")};
  CHECK(load(tok).encode("a\xC3\xA9\xC3\xA9"
                         "b") == two_unks);
  tok["model"]["fuse_unk"] = true;
  CHECK(load(tok).encode("a\xC3\xA9\xC3\xA9"
                         "b") == Ids{char_id(kSpace), char_id("a"), kUnk, char_id("b")});
  CHECK(load(tok).decode(Ids{kUnk, char_id("a")}) == "<unk>a");

  // With byte fallback lacking a byte, the character becomes <unk>; HF emits
  // it only at the next known character, after any byte tokens in between.
  json partial = llama2_style();
  partial["model"]["vocab"].erase("<0xC3>");
  CHECK(load(partial).encode("\xC3\xA9\xE4\xB8\x96"
                             "a") ==
        Ids{char_id(kSpace), byte_token(0xE4), byte_token(0xB8), byte_token(0x96), kUnk, char_id("a")});

  json none = llama2_style();
  none["model"]["byte_fallback"] = false;
  none["model"]["unk_token"] = nullptr;
  // HF drops what it has no token for.
  CHECK(load(none).encode("a\xC3\xA9"
                          "b") == Ids{char_id(kSpace), char_id("a"), char_id("b")});
}

TEST_CASE("Metaspace: prepend_scheme first only at the start of the input", "[tokenizer]") {
  const Tokenizer first = load(metaspace_style("first", false));
  CHECK(first.encode("hello") == Ids{kHello});
  // After a special token the text no longer starts the input.
  CHECK(first.encode("<s>hello") == Ids{kBos, char_id("h"), char_id("e"), char_id("l"), kLo});
  CHECK(first.encode("<s> hello") == Ids{kBos, kHello});
  CHECK(first.pre_tokenize("a b") == Words{kSpace + "a" + kSpace + "b"});
  // The decoder drops every replacement of the first token, spaces the others.
  CHECK(first.decode(Ids{kHello, kHello}) == "hello hello");
  CHECK(first.decode(Ids{char_id(kSpace), kHello}) == " hello");

  const Tokenizer always = load(metaspace_style("always", true));
  CHECK(always.encode("<s>hello") == Ids{kBos, kHello});
  CHECK(always.pre_tokenize("a  b") == Words{kSpace + "a", kSpace, kSpace + "b"});
  CHECK(always.pre_tokenize(kSpace + "x") == Words{kSpace + "x"});  // already there: no second one

  const Tokenizer never = load(metaspace_style("never", true));
  CHECK(never.encode("hello") == Ids{char_id("h"), char_id("e"), char_id("l"), kLo});
  CHECK(never.pre_tokenize("a b ") == Words{"a", kSpace + "b", kSpace});
  CHECK(never.decode(Ids{kHello, kHello}) == " hello hello");

  json legacy = metaspace_style("never", true);
  legacy["pre_tokenizer"].erase("prepend_scheme");
  legacy["pre_tokenizer"]["add_prefix_space"] = false;
  CHECK_THAT(load_error_of(legacy), Catch::Contains("pre_tokenizer.add_prefix_space"));
}

TEST_CASE("Metaspace first after a normalizer: where a piece starts in the input", "[tokenizer]") {
  // HF aligns a replacement with the last character it replaces: "xx" -> "-"
  // at the start no longer starts at offset 0, "x" -> "-" does.
  json tok = metaspace_style("first", false);
  tok["normalizer"] = replace("x+", "-", "Regex");
  const Tokenizer t = load(tok);
  CHECK(t.encode("xa") == Ids{char_id(kSpace), char_id("-"), char_id("a")});
  CHECK(t.encode("xxa") == Ids{char_id("-"), char_id("a")});
  tok["normalizer"] = {{"type", "NFC"}};
  CHECK_THAT(load_error_of(tok), Catch::Contains("NFC") && Catch::Contains("first"));
}

TEST_CASE("regex patterns that match the empty string cut as Oniguruma's do", "[tokenizer]") {
  // Expected values from HF tokenizers 0.23 (pre_tokenize_str, normalize_str).
  const auto split = [](const std::string& behavior) {
    json tok = llama2_style();
    tok["normalizer"] = nullptr;
    tok["pre_tokenizer"] = {
        {"type", "Split"}, {"pattern", {{"Regex", "x*"}}}, {"behavior", behavior}, {"invert", false}};
    return load(tok);
  };
  CHECK(split("Isolated").pre_tokenize("abxxc") == Words{"a", "b", "xx", "c"});
  CHECK(split("MergedWithPrevious").pre_tokenize("abxxc") == Words{"a", "bxx", "c"});
  CHECK(split("Removed").pre_tokenize("abxxc") == Words{"a", "b", "c"});

  json tok = llama2_style();
  tok["normalizer"] = replace("x*", "-", "Regex");
  const Ids dash_a_dash_b = {char_id("-"), char_id("a"), char_id("-"), char_id("b"), char_id("-")};
  CHECK(load(tok).encode("axxb") == dash_a_dash_b);
}

TEST_CASE("Strip and Fuse decoders; no decoder joins tokens with spaces", "[tokenizer]") {
  json tok = llama2_style();
  tok["decoder"] = {{"type", "Strip"}, {"content", "l"}, {"start", 2}, {"stop", 1}};
  // Each token on its own: "lo" loses its "l", "▁hello" nothing ("▁" leads, "o" ends).
  CHECK(load(tok).decode(Ids{kLo, kHello}) == "o" + kSpace + "hello");
  // Where HF's cuts would cross ("l" from both ends; HF panics) the token simply empties.
  tok["decoder"] = {{"type", "Strip"}, {"content", "h"}, {"start", 1}, {"stop", 1}};
  CHECK(load(tok).decode(Ids{char_id("h")}) == "");
  tok["decoder"] = {
      {"type", "Sequence"},
      {"decoders", {{{"type", "Fuse"}}, {{"type", "Strip"}, {"content", kSpace}, {"start", 0}, {"stop", 2}}}}};
  CHECK(load(tok).decode(Ids{kHello, char_id(kSpace), char_id(kSpace), char_id(kSpace)}) == kSpace + "hello" + kSpace);
  tok["decoder"] = nullptr;
  CHECK(load(tok).decode(Ids{kBos, kHello, char_id("a")}) == "<s> " + kSpace + "hello a");
}

TEST_CASE("added tokens take HF's ids, not the ones the file lists", "[tokenizer]") {
  json tok = llama2_style();
  const int32_t vocab_size = static_cast<int32_t>(tok["model"]["vocab"].size());
  const auto entry = [](int id, const std::string& content, bool special) {
    return json{{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", special}};
  };
  tok["added_tokens"].push_back(entry(7, "<new>", true));
  tok["added_tokens"].push_back(entry(9, kSpace + "hello", false));
  tok["added_tokens"].push_back(entry(8, "<newer>", true));
  tok["added_tokens"].push_back(entry(3, "", true));  // HF skips it
  const Tokenizer t = load(tok);
  CHECK(t.token_to_id("<new>") == vocab_size);       // not in the vocabulary: the next free id
  CHECK(t.token_to_id(kSpace + "hello") == kHello);  // in the vocabulary: its id there
  CHECK(t.token_to_id("<newer>") == vocab_size + 1);
  CHECK(t.vocab_size() == vocab_size + 2);
  CHECK(t.encode("a<new>") == Ids{char_id(kSpace), char_id("a"), vocab_size});
  CHECK(t.id_to_token(7) == "<0x04>");  // the listed ids change nothing
}

TEST_CASE("what rlcore lacks is refused, naming the component and the file", "[tokenizer]") {
  const auto path = std::filesystem::temp_directory_path() / "rlcore_sentencepiece_unsupported.json";
  const auto error_from_file = [&](const json& tok) -> std::string {
    std::ofstream(path, std::ios::binary) << tok.dump();
    try {
      Tokenizer::from_file(path.string());
    } catch (const rlcore::FormatError& e) {
      return e.what();
    }
    return "no FormatError";
  };
  json tok = llama2_style();
  tok["pre_tokenizer"] = {{"type", "Whitespace"}};
  CHECK_THAT(error_from_file(tok), Catch::Contains(path.string()) && Catch::Contains("pre_tokenizer.type") &&
                                       Catch::Contains("\"Whitespace\""));
  tok = llama2_style();
  tok["normalizer"]["normalizers"].push_back({{"type", "Lowercase"}});
  CHECK_THAT(error_from_file(tok), Catch::Contains(path.string()) &&
                                       Catch::Contains("normalizer.normalizers[2].type") &&
                                       Catch::Contains("\"Lowercase\""));
  tok = llama2_style();
  tok["decoder"]["decoders"][2] = {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}};
  CHECK_THAT(error_from_file(tok), Catch::Contains("decoder.decoders[2].type") && Catch::Contains("\"WordPiece\""));
  tok = llama2_style();
  tok["model"]["type"] = "Unigram";
  CHECK_THAT(error_from_file(tok),
             Catch::Contains(path.string()) && Catch::Contains("model.type") && Catch::Contains("\"Unigram\""));
  tok = llama2_style();
  tok["post_processor"] = {{"type", "BertProcessing"}, {"sep", {"</s>", 2}}, {"cls", {"<s>", 1}}};
  CHECK_THAT(error_from_file(tok), Catch::Contains("post_processor.type") && Catch::Contains("\"BertProcessing\""));
  tok = llama2_style();
  tok["model"]["continuing_subword_prefix"] = "##";
  CHECK_THAT(error_from_file(tok), Catch::Contains("model.continuing_subword_prefix"));
  tok = llama2_style();
  tok["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers", {{{"type", "ByteLevel"}, {"add_prefix_space", false}}, metaspace("always", true)}}};
  CHECK_THAT(error_from_file(tok),
             Catch::Contains("pre_tokenizer.pretokenizers[1]") && Catch::Contains("ByteLevel must be the last step"));
  tok = llama2_style();
  tok["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers", {metaspace("always", true), metaspace("first", true)}}};
  CHECK_THAT(error_from_file(tok), Catch::Contains("second Metaspace"));
  std::filesystem::remove(path);
}
