// Real tokenizers held to Hugging Face tokenizers 0.23: Qwen3 and Llama 3.1
// (byte-level BPE) and Llama 2 (SentencePiece-style BPE with byte fallback),
// from tests/fixtures/tokenizers/. tests/libs/tokenizer/reference/tokenizer_reference.py
// encodes and decodes the shared texts and 10,000 seeded random strings with
// tokenizers.Tokenizer.from_file; every one must come out the same here.
// Variants of the Llama 2 file (the script's VARIANTS) swap in the components
// no shared file uses: Metaspace in each prepend_scheme, Replace normalizers
// that move offsets, Gemma's layout, unk_token with and without fuse_unk,
// partial byte fallback, every Split behavior, Strip and no decoder at all.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../../common/reference_python.h"
#include "rlcore/tokenizer/tokenizer.h"
#include "../../common/test_paths.h"

using rlcore::Tokenizer;
using Ids = std::vector<int32_t>;

namespace {

constexpr int kRandomTexts = 10000;
constexpr int kVariantRandomTexts = 2000;
constexpr int kSeed = 20250617;
constexpr int kShownMismatches = 3;

const std::filesystem::path kFixtures = std::filesystem::path(rlcore_test::source_dir()) / "tests/fixtures/tokenizers";

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// Printable ASCII as it is; anything else as an escape, so a mismatch report
// shows exactly which characters went in.
std::string escaped(const std::string& text) {
  std::string out = "\"";
  char buffer[16];
  for (std::size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    int length = byte < 0x80 ? 1 : (byte >> 5) == 0x6 ? 2 : (byte >> 4) == 0xE ? 3 : (byte >> 3) == 0x1E ? 4 : 0;
    if (length == 0 || i + static_cast<std::size_t>(length) > text.size()) length = 0;
    char32_t cp = length == 1 ? byte : length == 2 ? byte & 0x1F : length == 3 ? byte & 0x0F : byte & 0x07;
    for (int k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]);
      if ((next & 0xC0) != 0x80) length = 0;
      cp = (cp << 6) | (next & 0x3F);
    }
    if (length == 0) {
      std::snprintf(buffer, sizeof(buffer), "\\x%02X", byte);
      out += buffer;
      ++i;
      continue;
    }
    if (cp == '"' || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp >= 0x20 && cp < 0x7F) {
      out += static_cast<char>(cp);
    } else {
      std::snprintf(buffer, sizeof(buffer), "\\u{%X}", static_cast<unsigned>(cp));
      out += buffer;
    }
    i += static_cast<std::size_t>(length);
  }
  return out + "\"";
}

std::string shown(const Ids& ids) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < ids.size(); ++i) out << (i ? ", " : "") << ids[i];
  out << "]";
  return out.str();
}

// Counts the cases where rlcore differs from the reference and describes the first few.
class Mismatches {
 public:
  explicit Mismatches(std::string what) : what_(std::move(what)) {}

  void add(const std::string& input, const std::string& expected, const std::string& got) {
    if (++count_ <= kShownMismatches) {
      report_ << "\n  " << what_ << " of " << input << "\n    HF:     " << expected << "\n    rlcore: " << got;
    }
  }

  void check() const {
    INFO(count_ << " mismatches in " << what_ << ", the first:" << report_.str());
    CHECK(count_ == 0);
  }

 private:
  std::string what_;
  int count_ = 0;
  std::ostringstream report_;
};

Ids ids_of(const nlohmann::json& list) { return list.get<Ids>(); }

// `variant`: one of tokenizer_reference.py's VARIANTS, applied to the file first.
void check_against_hf(const std::string& name, const std::string& variant = "") {
  const int random_texts = variant.empty() ? kRandomTexts : kVariantRandomTexts;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("rlcore_tokenizer_hf_" + name + variant + "_" + std::to_string(::getpid()));
  std::vector<std::string> args = {(kFixtures / name).string(), (kFixtures / "texts.json").string(),
                                   std::to_string(kSeed), std::to_string(random_texts), dir.string()};
  if (!variant.empty()) args.push_back(variant);
  rlcore_test::run_reference(rlcore_test::reference_script("libs/tokenizer/reference/tokenizer_reference.py"), args);
  const nlohmann::json reference = read_json(dir / "reference.json");
  const Tokenizer tok = Tokenizer::from_pretrained_dir(dir.string());
  std::filesystem::remove_all(dir);
  INFO("tokenizer " << name << (variant.empty() ? "" : " as " + variant) << ", reference tokenizers "
                    << reference["tokenizers_version"].get<std::string>());

  const auto& texts = reference["texts"];
  REQUIRE(texts.size() == read_json(kFixtures / "texts.json").size() + static_cast<std::size_t>(random_texts));
  Mismatches encoded("encode(add_special_tokens=False)");
  Mismatches with_specials("encode(add_special_tokens=True)");
  Mismatches as_text("encode with special tokens as text");
  Mismatches decoded("decode(skip_special_tokens=False)");
  Mismatches decoded_skip("decode(skip_special_tokens=True)");
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    const Ids ids = tok.encode(text);
    const Ids expected = ids_of(reference["ids"][i]);
    if (ids != expected) encoded.add(escaped(text), shown(expected), shown(ids));
    const Ids special = tok.post_process(ids);
    const Ids expected_special = ids_of(reference["ids_special"][i]);
    if (special != expected_special) with_specials.add(escaped(text), shown(expected_special), shown(special));
    const Ids plain = tok.encode(text, /*parse_special_tokens=*/false);
    const Ids expected_plain = ids_of(reference["ids_as_text"][i]);
    if (plain != expected_plain) as_text.add(escaped(text), shown(expected_plain), shown(plain));
    for (const bool skip : {false, true}) {
      const std::string expected_text = reference[skip ? "decoded_skip" : "decoded"][i].get<std::string>();
      const std::string got = tok.decode_lossy(expected_special, skip);
      if (got != expected_text)
        (skip ? decoded_skip : decoded).add(shown(expected_special), escaped(expected_text), escaped(got));
    }
  }
  encoded.check();
  with_specials.check();
  as_text.check();
  decoded.check();
  decoded_skip.check();

  // Arbitrary id sequences: byte tokens that do not make UTF-8, specials anywhere.
  Mismatches random_decoded("decode(skip_special_tokens=False) of random ids");
  Mismatches random_decoded_skip("decode(skip_special_tokens=True) of random ids");
  const auto& random_ids = reference["random_ids"];
  REQUIRE(random_ids.size() == static_cast<std::size_t>(random_texts / 10));
  for (std::size_t i = 0; i < random_ids.size(); ++i) {
    const Ids ids = ids_of(random_ids[i]);
    for (const bool skip : {false, true}) {
      const std::string expected_text =
          reference[skip ? "random_decoded_skip" : "random_decoded"][i].get<std::string>();
      const std::string got = tok.decode_lossy(ids, skip);
      if (got != expected_text)
        (skip ? random_decoded_skip : random_decoded).add(shown(ids), escaped(expected_text), escaped(got));
    }
  }
  random_decoded.check();
  random_decoded_skip.check();
  if (!variant.empty()) return;

  // The shared reference_ids.jsonl, made by another implementation of HF's tokenizers.
  std::ifstream lines(kFixtures / "reference_ids.jsonl");
  std::string line;
  int rows = 0;
  Mismatches shared("encode (reference_ids.jsonl)");
  while (std::getline(lines, line)) {
    const nlohmann::json row = nlohmann::json::parse(line);
    if (row["tokenizer"] != name) continue;
    ++rows;
    const std::string text = row["text"].get<std::string>();
    const Ids ids = tok.encode(text);
    if (ids != ids_of(row["ids"])) shared.add(escaped(text), shown(ids_of(row["ids"])), shown(ids));
    if (tok.post_process(ids) != ids_of(row["ids_special"])) {
      shared.add(escaped(text) + " (with special tokens)", shown(ids_of(row["ids_special"])),
                 shown(tok.post_process(ids)));
    }
  }
  CHECK(rows == 22);
  shared.check();
}

}  // namespace

TEST_CASE("Qwen3's tokenizer.json encodes and decodes as HF tokenizers does", "[tokenizer][hf]") {
  check_against_hf("qwen3");
}

TEST_CASE("Llama 3.1's tokenizer.json encodes and decodes as HF tokenizers does", "[tokenizer][hf]") {
  check_against_hf("llama3_1");
}

TEST_CASE("Llama 2's SentencePiece-style tokenizer.json encodes and decodes as HF tokenizers does", "[tokenizer][hf]") {
  check_against_hf("llama2");
}

TEST_CASE("Metaspace prepend_scheme first, with its decoder, as HF tokenizers has it", "[tokenizer][hf]") {
  check_against_hf("llama2", "metaspace_first");
}

TEST_CASE("Metaspace first behind a Split and offset-moving Replace normalizers, as HF", "[tokenizer][hf]") {
  check_against_hf("llama2", "metaspace_first_after_normalizer");
}

TEST_CASE("Metaspace prepend_scheme always with the Replace/ByteFallback/Fuse/Strip decoder, as HF",
          "[tokenizer][hf]") {
  check_against_hf("llama2", "metaspace_always");
}

TEST_CASE("Metaspace prepend_scheme never after NFC, Strip decoders, as HF", "[tokenizer][hf]") {
  check_against_hf("llama2", "metaspace_never");
}

TEST_CASE("Gemma-style Replace normalizer and MergedWithPrevious split, as HF", "[tokenizer][hf]") {
  check_against_hf("llama2", "gemma_style");
}

TEST_CASE("unk_token without byte fallback, as HF", "[tokenizer][hf]") { check_against_hf("llama2", "unk_tokens"); }

TEST_CASE("fused unk_token with partial byte fallback, as HF", "[tokenizer][hf]") {
  check_against_hf("llama2", "fused_unk_partial_fallback");
}

TEST_CASE("Split behaviors, invert, empty matches and no decoder, as HF", "[tokenizer][hf]") {
  check_against_hf("llama2", "split_behaviors");
}
