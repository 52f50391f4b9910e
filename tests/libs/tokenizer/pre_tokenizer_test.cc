// Pre-tokenizer tests: GPT-2's, Qwen2's and Llama-3's regex splits of real
// text, each worked out by hand from the patterns.
#include <catch2/catch.hpp>

#include "rlcore/error.h"
#include "rlcore/tokenizer/tokenizer.h"
#include "tokenizer_fixture.h"

using rlcore::Tokenizer;
using rlcore::test::Fixture;
using Words = std::vector<std::string>;

namespace {

Tokenizer with_pre_tokenizer(const nlohmann::json& pre_tokenizer) {
  Fixture f;
  f.pre_tokenizer = pre_tokenizer;
  return Tokenizer::from_json(f.text());
}

Tokenizer gpt2() { return with_pre_tokenizer(rlcore::test::byte_level_pre_tokenizer(true)); }
Tokenizer qwen2() { return with_pre_tokenizer(rlcore::test::split_pre_tokenizer(rlcore::test::kQwen2Regex)); }
Tokenizer llama3() { return with_pre_tokenizer(rlcore::test::split_pre_tokenizer(rlcore::test::kLlama3Regex)); }

}  // namespace

TEST_CASE("GPT-2 regex: words keep their leading space", "[tokenizer]") {
  const Tokenizer tok = gpt2();
  CHECK(tok.pre_tokenize("Hello world") == Words{"Hello", " world"});
  CHECK(tok.pre_tokenize("naïve café") == Words{"naïve", " café"});
  CHECK(tok.pre_tokenize("") == Words{});
}

TEST_CASE("GPT-2 regex: contractions are split off, case-sensitively", "[tokenizer]") {
  const Tokenizer tok = gpt2();
  CHECK(tok.pre_tokenize("I'm here, they've gone. She'll say we'd") ==
        Words{"I", "'m", " here", ",", " they", "'ve", " gone", ".", " She", "'ll", " say", " we", "'d"});
  CHECK(tok.pre_tokenize("don't it's") == Words{"don", "'t", " it", "'s"});
  // 's only matches lower case, so "'S" is punctuation then a word.
  CHECK(tok.pre_tokenize("IT'S") == Words{"IT", "'", "S"});
}

TEST_CASE("GPT-2 regex: numbers and punctuation", "[tokenizer]") {
  const Tokenizer tok = gpt2();
  CHECK(tok.pre_tokenize("Numbers 123 and 4.5") == Words{"Numbers", " 123", " and", " 4", ".", "5"});
  CHECK(tok.pre_tokenize("$100!! (ok)") == Words{"$", "100", "!!", " (", "ok", ")"});
  CHECK(tok.pre_tokenize("12+345=357") == Words{"12", "+", "345", "=", "357"});
}

TEST_CASE("GPT-2 regex: runs of spaces leave the last one to the next word", "[tokenizer]") {
  const Tokenizer tok = gpt2();
  // \s+(?!\S) stops one space short of a word, which then takes " b".
  CHECK(tok.pre_tokenize("a  b") == Words{"a", " ", " b"});
  CHECK(tok.pre_tokenize("a    b") == Words{"a", "   ", " b"});
  CHECK(tok.pre_tokenize("end   ") == Words{"end", "   "});
  CHECK(tok.pre_tokenize("line1\n\nline2") == Words{"line", "1", "\n", "\n", "line", "2"});
  CHECK(tok.pre_tokenize("a\tb") == Words{"a", "\t", "b"});
}

TEST_CASE("GPT-2 regex: invalid UTF-8 lands between the matches", "[tokenizer]") {
  const Tokenizer tok = gpt2();
  CHECK(tok.pre_tokenize("ab\xFF"
                         "cd") == Words{"ab", "\xFF", "cd"});
  CHECK(tok.pre_tokenize("x \xE4\xB8 y") == Words{"x", " ", "\xE4\xB8", " y"});
}

TEST_CASE("Qwen2 regex: single digits, punctuation glued to words, newlines", "[tokenizer]") {
  const Tokenizer tok = qwen2();
  CHECK(tok.pre_tokenize("Hello world 12345") == Words{"Hello", " world", " ", "1", "2", "3", "4", "5"});
  CHECK(tok.pre_tokenize("hello\n\nworld") == Words{"hello", "\n\n", "world"});
  CHECK(tok.pre_tokenize("x = 1;\n") == Words{"x", " =", " ", "1", ";\n"});
  // [^\r\n\p{L}\p{N}]?\p{L}+ lets one punctuation character lead a word.
  CHECK(tok.pre_tokenize(".Hello") == Words{".Hello"});
  // (?i:...) makes the contractions case-insensitive.
  CHECK(tok.pre_tokenize("IT'S") == Words{"IT", "'S"});
  CHECK(tok.pre_tokenize("你好，世界") == Words{"你好", "，世界"});
}

TEST_CASE("Llama-3 regex: numbers in groups of up to three digits", "[tokenizer]") {
  const Tokenizer tok = llama3();
  CHECK(tok.pre_tokenize("1234567") == Words{"123", "456", "7"});
  CHECK(tok.pre_tokenize("pay $1,000") == Words{"pay", " $", "1", ",", "000"});
}

TEST_CASE("Split steps run in order and ByteLevel can add a prefix space", "[tokenizer]") {
  nlohmann::json sequence = rlcore::test::split_pre_tokenizer("-");
  sequence["pretokenizers"][0]["pattern"] = {{"String", "-"}};
  sequence["pretokenizers"][1] = rlcore::test::byte_level_pre_tokenizer(true);
  sequence["pretokenizers"][1]["add_prefix_space"] = true;
  const Tokenizer tok = with_pre_tokenizer(sequence);
  // Pieces "a b", "-", "c": each gets a space unless it has one, then GPT-2's regex.
  CHECK(tok.pre_tokenize("a b-c") == Words{" a", " b", " -", " c"});
}

TEST_CASE("a pre-tokenizer without a final ByteLevel is rejected", "[tokenizer]") {
  Fixture f;
  f.pre_tokenizer = rlcore::test::split_pre_tokenizer("\\s+");
  f.pre_tokenizer["pretokenizers"].erase(1);
  CHECK_THROWS_AS(Tokenizer::from_json(f.text()), rlcore::FormatError);
  f.pre_tokenizer = nullptr;
  CHECK_THROWS_WITH(Tokenizer::from_json(f.text()), Catch::Contains("pre_tokenizer: missing"));
}
