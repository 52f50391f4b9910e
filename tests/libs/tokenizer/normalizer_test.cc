// NFC normalizer tests (Qwen2 ships one): composition, reordering, Hangul,
// exclusions and singletons, and invalid bytes passing through.
#include <catch2/catch.hpp>

#include "rlcore/tokenizer/tokenizer.h"
#include "tokenizer_fixture.h"

using rlcore::Tokenizer;
using rlcore::test::byte_ids;
using rlcore::test::Fixture;

namespace {

Tokenizer nfc_tokenizer(nlohmann::json normalizer = {{"type", "NFC"}}) {
  Fixture f;
  f.normalizer = std::move(normalizer);
  return Tokenizer::from_json(f.text());
}

// A merge-free fixture encodes each byte of the normalized text as its own id.
std::string normalized(const Tokenizer& tok, const std::string& text) {
  std::string out;
  for (int32_t id : tok.encode(text)) out.push_back(static_cast<char>(id));
  return out;
}

}  // namespace

TEST_CASE("NFC composes, reorders and handles Hangul", "[tokenizer]") {
  const Tokenizer tok = nfc_tokenizer();
  CHECK(normalized(tok, "e\u0301") == "\u00E9");
  CHECK(normalized(tok, "\u212B") == "\u00C5");  // the Angstrom sign is a singleton
  // Dot below (class 220) sorts before circumflex (230) either way round.
  CHECK(normalized(tok, "a\u0302\u0323") == "\u1EAD");
  CHECK(normalized(tok, "a\u0323\u0302") == "\u1EAD");
  CHECK(normalized(tok, "\u1E0B\u0323") == "\u1E0D\u0307");
  CHECK(normalized(tok, "\u1100\u1161\u11A8") == "\uAC01");
  CHECK(normalized(tok, "\uAC00\u11A8") == "\uAC01");
  CHECK(normalized(tok, "\u0958") == "\u0915\u093C");  // a composition exclusion
  CHECK(normalized(tok, "\u0344") == "\u0308\u0301");  // a non-starter decomposition
  // A precomposed letter decomposes so a later mark can sort in before its accent.
  CHECK(normalized(tok, "\u00E9\u0323") == "\u1EB9\u0301");
  // Marks after a non-ASCII letter in mixed text still reach it.
  CHECK(normalized(tok, "ab e\u0301 cd \u4E16e\u0301\u0323x") == "ab \u00E9 cd \u4E16\u1EB9\u0301x");
}

TEST_CASE("NFC leaves normalized text and invalid bytes alone", "[tokenizer]") {
  const Tokenizer tok = nfc_tokenizer();
  for (const std::string& text :
       {std::string("plain ascii"), std::string("h\u00E9llo \u4E16\u754C \u0645\u0631\u062D\u0628\u0627"),
        std::string("\u1EAD\uAC01"), std::string("e\xFF\xCC\x81"), std::string("\xCC"),
        std::string("\xE2\x82 broken")}) {
    INFO(text);
    CHECK(normalized(tok, text) == text);
    CHECK(tok.encode(text) == byte_ids(text));
  }
}

TEST_CASE("NFC inside a Sequence; other normalizers are rejected", "[tokenizer]") {
  const Tokenizer tok =
      nfc_tokenizer(nlohmann::json::parse(R"({"type": "Sequence", "normalizers": [{"type": "NFC"}]})"));
  CHECK(normalized(tok, "e\u0301") == "\u00E9");
  CHECK_THROWS_WITH(nfc_tokenizer(nlohmann::json::parse(R"({"type": "Sequence", "normalizers": [{"type": "NFKC"}]})")),
                    Catch::Contains("normalizer.normalizers[0]"));
}

TEST_CASE("normalized added tokens match the normalized text", "[tokenizer]") {
  Fixture f;
  f.normalizer = {{"type", "NFC"}};
  const int32_t cafe = f.add_token("cafe\u0301", false);  // normalized: matched as "café"
  const int32_t raw = f.add_token("<e\u0301>", true, {{"normalized", false}});
  const Tokenizer tok = Tokenizer::from_json(f.text());
  CHECK(tok.encode("un caf\u00E9") == std::vector<int32_t>{'u', 'n', ' ', cafe});
  CHECK(tok.encode("un cafe\u0301") == std::vector<int32_t>{'u', 'n', ' ', cafe});
  // A raw token is matched before normalization could rewrite it.
  CHECK(tok.encode("<e\u0301>") == std::vector<int32_t>{raw});
}
