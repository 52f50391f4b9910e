// Prompt templates: exact ChatML text, plain passthrough, and name errors.
#include <catch2/catch.hpp>

#include "rlcore/error.h"
#include "rlcore/tokenizer/prompt_template.h"

using rlcore::PromptTemplate;

TEST_CASE("chat wraps the prompt in ChatML", "[tokenizer]") {
  const PromptTemplate chat = PromptTemplate::from_name("chat");
  CHECK(chat.kind() == PromptTemplate::Kind::kChat);
  CHECK(chat.apply("What is 2+2?") == "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
  const PromptTemplate with_system = PromptTemplate::from_name("chat", "You add numbers.");
  CHECK(with_system.apply("1+1") ==
        "<|im_start|>system\nYou add numbers.<|im_end|>\n"
        "<|im_start|>user\n1+1<|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("plain leaves the prompt unchanged", "[tokenizer]") {
  const PromptTemplate plain = PromptTemplate::from_name("plain");
  CHECK(plain.kind() == PromptTemplate::Kind::kPlain);
  CHECK(plain.name() == "plain");
  CHECK(plain.apply("Question: 3*4\nAnswer:") == "Question: 3*4\nAnswer:");
  CHECK(plain.apply("") == "");
}

TEST_CASE("an unknown template name lists the valid ones", "[tokenizer]") {
  CHECK(PromptTemplate::names() == std::vector<std::string>{"chat", "plain"});
  CHECK_THROWS_AS(PromptTemplate::from_name("llama"), rlcore::ConfigError);
  CHECK_THROWS_WITH(PromptTemplate::from_name("llama"), Catch::Contains("'llama'") && Catch::Contains("chat, plain"));
  CHECK_THROWS_WITH(PromptTemplate::from_name("plain", "sys"), Catch::Contains("no system message"));
}
