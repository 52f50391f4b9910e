// The built-in tasks' tokenizer: HF format, digit-by-digit numbers, one token
// per task word, and the chat markers as special tokens.
#include <catch2/catch.hpp>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "rlcore/tokenizer/prompt_template.h"
#include "rlcore/tokenizer/tokenizer.h"
#include "tokenizer_fixture.h"

using rlcore::Tokenizer;
using Ids = std::vector<int32_t>;

TEST_CASE("the built-in tokenizer.json is byte-level BPE in HF's format", "[tokenizer]") {
  const nlohmann::json json = nlohmann::json::parse(rlcore::make_builtin_tokenizer_json());
  CHECK(json["model"]["type"] == "BPE");
  CHECK(json["decoder"]["type"] == "ByteLevel");
  for (int b = 0; b < 256; ++b) {
    CHECK(json["model"]["vocab"][rlcore::test::byte_char(static_cast<uint8_t>(b))] == b);
  }
  CHECK(json["added_tokens"].size() == 3);
  for (const auto& merge : json["model"]["merges"]) {
    // No merge may join anything to a digit, or numbers would stop splitting.
    const std::string joined = merge[0].get<std::string>() + merge[1].get<std::string>();
    CHECK(joined.find_first_of("0123456789") == std::string::npos);
  }
}

TEST_CASE("the built-in tokenizer encodes numbers digit by digit", "[tokenizer]") {
  const Tokenizer tok = rlcore::make_builtin_tokenizer();
  const Ids ids = tok.encode("12+345=357");
  CHECK(ids == Ids{'1', '2', '+', '3', '4', '5', '=', '3', '5', '7'});
  CHECK(tok.decode(ids) == "12+345=357");
  CHECK(tok.encode(" 9081726354") == Ids{' ', '9', '0', '8', '1', '7', '2', '6', '3', '5', '4'});
}

TEST_CASE("the built-in tokenizer has one token per task word", "[tokenizer]") {
  const Tokenizer tok = rlcore::make_builtin_tokenizer();
  for (const std::string word : {"Question", "Answer", "####", " ####", "system", "user", "assistant", " What", " is",
                                 " the", " answer", " +", " -", " *", " =", "\n\n"}) {
    INFO("word: " << word);
    const Ids ids = tok.encode(word);
    REQUIRE(ids.size() == 1);
    CHECK(ids[0] >= 256);
    CHECK(tok.decode(ids) == word);
  }
  const Ids question = tok.encode("Question: What is 7 * 6?\nAnswer: #### 42");
  CHECK(tok.decode(question) == "Question: What is 7 * 6?\nAnswer: #### 42");
  CHECK(question == Ids{*tok.token_to_id("Question"), ':', *tok.token_to_id("\xC4\xA0What"),
                        *tok.token_to_id("\xC4\xA0is"), ' ', '7', *tok.token_to_id("\xC4\xA0*"), ' ', '6', '?', '\n',
                        *tok.token_to_id("Answer"), ':', *tok.token_to_id("\xC4\xA0####"), ' ', '4', '2'});
}

TEST_CASE("the built-in tokenizer keeps chat markers whole", "[tokenizer]") {
  const Tokenizer tok = rlcore::make_builtin_tokenizer();
  const auto im_start = tok.token_to_id("<|im_start|>");
  const auto im_end = tok.token_to_id("<|im_end|>");
  REQUIRE(im_start.has_value());
  REQUIRE(im_end.has_value());
  CHECK(tok.eos_token_id() == im_end);
  CHECK(tok.pad_token_id() == tok.token_to_id("<|endoftext|>"));
  CHECK(tok.vocab_size() == *tok.token_to_id("<|im_end|>") + 1);

  const std::string prompt = rlcore::PromptTemplate::from_name("chat", "Be brief.").apply("What is 2+3?");
  const Ids ids = tok.encode(prompt);
  CHECK(ids.front() == *im_start);
  CHECK(std::count(ids.begin(), ids.end(), *im_end) == 2);
  CHECK(tok.decode(ids) == prompt);
  CHECK(tok.decode(ids, true) == "system\nBe brief.\nuser\nWhat is 2+3?\nassistant\n");
  CHECK(tok.encode("<|im_start|>user\n") == Ids{*im_start, *tok.token_to_id("user"), '\n'});
}
