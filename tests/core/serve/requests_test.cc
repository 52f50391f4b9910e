// Parsing and validation of serve requests: JSON in, typed request or a 400
// with the exact message and the field named out. No tokenizer, no socket.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "rlcore/core/serve/api_error.h"
#include "rlcore/core/serve/requests.h"

using nlohmann::json;
using rlcore::serve::ApiError;
using rlcore::serve::CompletionRequest;
using rlcore::serve::parse_completion_request;

namespace {

CompletionRequest parse(const std::string& text) { return parse_completion_request(json::parse(text)); }

// The ApiError a completion body gets; fails when it is accepted.
ApiError rejection(const std::string& text) {
  try {
    parse(text);
  } catch (const ApiError& e) {
    return e;
  }
  FAIL("accepted: " << text);
  return ApiError(0, "", "");
}

// The message of the ApiError that f throws.
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    CHECK(e.status() == 400);
    return e.what();
  }
  FAIL("expected an ApiError");
  return {};
}

struct Case {
  const char* body;
  const char* message;
  const char* param;
};

void check_rejections(const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    INFO(c.body);
    const ApiError error = rejection(c.body);
    CHECK(error.status() == 400);
    CHECK(error.type() == "BadRequestError");
    CHECK(std::string(error.what()) == c.message);
    CHECK(error.param() == c.param);
  }
}

}  // namespace

TEST_CASE("a minimal completion request gets vLLM's defaults", "[serve][requests]") {
  const auto request = parse(R"({"prompt": "hello"})");
  REQUIRE(request.prompts.size() == 1);
  CHECK(*request.prompts[0].text == "hello");
  CHECK(request.model.empty());
  CHECK(request.n == 1);
  CHECK(request.max_tokens == 16);
  CHECK(request.temperature == 1.0);
  CHECK(request.top_p == 1.0);
  CHECK(request.top_k == -1);
  CHECK_FALSE(request.seed.has_value());
  CHECK_FALSE(request.logprobs.has_value());
  CHECK(request.stop_token_ids.empty());
  CHECK_FALSE(request.ignore_eos);
  CHECK(request.add_special_tokens);
  CHECK(request.skip_special_tokens);
  CHECK_FALSE(request.return_token_ids);
  CHECK_FALSE(request.return_tokens_as_token_ids);
}

TEST_CASE("every supported completion field is read", "[serve][requests]") {
  const auto request = parse(R"({
    "model": "m", "prompt": [[1, 2], [3]], "n": 3, "max_tokens": 7.0, "temperature": 0,
    "top_p": 0.5, "top_k": 0, "seed": -5, "stop_token_ids": [9, 10], "logprobs": 1,
    "ignore_eos": true, "add_special_tokens": false, "skip_special_tokens": false,
    "include_stop_str_in_output": true, "return_token_ids": true, "return_tokens_as_token_ids": true,
    "stream": false, "echo": false, "stop": [], "frequency_penalty": 0, "best_of": 1,
    "suffix": null, "response_format": {"type": "text"}, "user": "ignored", "unknown_field": 1})");
  CHECK(request.model == "m");
  REQUIRE(request.prompts.size() == 2);
  CHECK(request.prompts[0].token_ids == std::vector<int64_t>{1, 2});
  CHECK(request.prompts[1].token_ids == std::vector<int64_t>{3});
  CHECK_FALSE(request.prompts[0].text.has_value());
  CHECK(request.n == 3);
  CHECK(request.max_tokens == 7);
  CHECK(request.temperature == 0.0);
  CHECK(request.top_p == 0.5);
  CHECK(request.top_k == -1);  // 0 means disabled, as in current vLLM
  CHECK(request.seed == -5);
  CHECK(request.stop_token_ids == std::vector<int64_t>{9, 10});
  CHECK(request.logprobs == 1);
  CHECK(request.ignore_eos);
  CHECK_FALSE(request.add_special_tokens);
  CHECK_FALSE(request.skip_special_tokens);
  CHECK(request.include_stop_str_in_output);
  CHECK(request.return_token_ids);
  CHECK(request.return_tokens_as_token_ids);
}

TEST_CASE("null fields take their defaults", "[serve][requests]") {
  const auto request = parse(R"({"prompt": "x", "n": null, "max_tokens": null, "temperature": null,
                                 "logprobs": null, "seed": null, "stop_token_ids": null, "model": null})");
  CHECK(request.n == 1);
  CHECK(request.max_tokens == 16);
  CHECK(request.temperature == 1.0);
  CHECK_FALSE(request.logprobs.has_value());
  CHECK_FALSE(request.seed.has_value());
  CHECK(request.model.empty());
}

TEST_CASE("the four prompt shapes", "[serve][requests]") {
  CHECK(*parse(R"({"prompt": "one"})").prompts.at(0).text == "one");
  const auto texts = parse(R"({"prompt": ["a", "b", "c"]})").prompts;
  REQUIRE(texts.size() == 3);
  CHECK(*texts[2].text == "c");
  const auto ids = parse(R"({"prompt": [5, 6, 7]})").prompts;
  REQUIRE(ids.size() == 1);
  CHECK(ids[0].token_ids == std::vector<int64_t>{5, 6, 7});
  const auto lists = parse(R"({"prompt": [[5], [6, 7]]})").prompts;
  REQUIRE(lists.size() == 2);
  CHECK(lists[1].token_ids == std::vector<int64_t>{6, 7});
}

TEST_CASE("bad prompts are 400s naming prompt", "[serve][requests]") {
  const char* shapes =
      "prompt must be a string, a list of strings, a list of token ids or a list of lists of token ids.";
  check_rejections({
      {R"({})", "prompt must be provided and non-empty.", "prompt"},
      {R"({"prompt": null})", "prompt must be provided and non-empty.", "prompt"},
      {R"({"prompt": ""})", "prompt must be provided and non-empty.", "prompt"},
      {R"({"prompt": []})", "prompt must not be an empty list.", "prompt"},
      {R"({"prompt": 5})", shapes, "prompt"},
      {R"({"prompt": {"text": "a"}})", shapes, "prompt"},
      {R"({"prompt": ["a", 1]})", shapes, "prompt"},
      {R"({"prompt": [1, "a"]})", shapes, "prompt"},
      {R"({"prompt": [1.5]})", shapes, "prompt"},
      {R"({"prompt": [[1], "a"]})", shapes, "prompt"},
      {R"({"prompt": [[1], [true]]})", shapes, "prompt"},
      {R"({"prompt": [null]})", shapes, "prompt"},
      {R"({"prompt": [1, -2]})", "prompt token ids must be non-negative, got -2.", "prompt"},
      {R"({"prompt": [[3], [-1]]})", "prompt token ids must be non-negative, got -1.", "prompt"},
  });
}

TEST_CASE("more prompts than the limit are refused", "[serve][requests]") {
  json body = {{"prompt", json::array()}};
  for (int i = 0; i < 5; ++i) body["prompt"].push_back("p");
  rlcore::serve::RequestLimits limits;
  limits.max_prompts = 4;
  try {
    parse_completion_request(body, limits);
    FAIL("accepted 5 prompts with a limit of 4");
  } catch (const ApiError& e) {
    CHECK(std::string(e.what()) == "prompt list length 5 exceeds the maximum allowed count of 4.");
  }
  // One prompt of many token ids is one prompt, not many.
  body = {{"prompt", {1, 2, 3, 4, 5, 6}}};
  CHECK(parse_completion_request(body, limits).prompts.size() == 1);
}

TEST_CASE("wrong types are 400s naming the field", "[serve][requests]") {
  check_rejections({
      {R"({"prompt": "x", "model": 3})", "model must be a string, got 3.", "model"},
      {R"({"prompt": "x", "n": "2"})", "n must be an integer, got \"2\".", "n"},
      {R"({"prompt": "x", "n": 1.5})", "n must be an integer, got 1.5.", "n"},
      {R"({"prompt": "x", "n": true})", "n must be an integer, got true.", "n"},
      {R"({"prompt": "x", "max_tokens": [1]})", "max_tokens must be an integer, got [1].", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 18446744073709551615})",
       "max_tokens must be an integer, got 18446744073709551615.", "max_tokens"},
      {R"({"prompt": "x", "temperature": "hot"})", "temperature must be a number, got \"hot\".", "temperature"},
      {R"({"prompt": "x", "top_p": false})", "top_p must be a number, got false.", "top_p"},
      {R"({"prompt": "x", "top_k": 2.5})", "top_k must be an integer, got 2.5.", "top_k"},
      {R"({"prompt": "x", "seed": "s"})", "seed must be an integer, got \"s\".", "seed"},
      {R"({"prompt": "x", "logprobs": true})", "logprobs must be an integer, got true.", "logprobs"},
      {R"({"prompt": "x", "stop_token_ids": 3})", "stop_token_ids must be a list of integers, got 3.",
       "stop_token_ids"},
      {R"({"prompt": "x", "stop_token_ids": [1, "2"]})", "stop_token_ids must be a list of integers, got \"2\" in it.",
       "stop_token_ids"},
      {R"({"prompt": "x", "stop_token_ids": [-4]})", "stop_token_ids must contain non-negative token ids, got -4.",
       "stop_token_ids"},
      {R"({"prompt": "x", "ignore_eos": 1})", "ignore_eos must be a boolean, got 1.", "ignore_eos"},
      {R"({"prompt": "x", "return_token_ids": "yes"})", "return_token_ids must be a boolean, got \"yes\".",
       "return_token_ids"},
      {R"({"prompt": "x", "return_tokens_as_token_ids": 0})", "return_tokens_as_token_ids must be a boolean, got 0.",
       "return_tokens_as_token_ids"},
      {R"({"prompt": "x", "add_special_tokens": "no"})", "add_special_tokens must be a boolean, got \"no\".",
       "add_special_tokens"},
  });
}

TEST_CASE("out-of-range values are 400s with vLLM's wording", "[serve][requests]") {
  check_rejections({
      {R"({"prompt": "x", "n": 0})", "n must be at least 1, got 0.", "n"},
      {R"({"prompt": "x", "n": 129})", "n must be at most 128, got 129.", "n"},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens must be at least 1, got 0.", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": -3})", "max_tokens must be at least 1, got -3.", "max_tokens"},
      {R"({"prompt": "x", "temperature": -0.5})", "temperature must be non-negative, got -0.5.", "temperature"},
      {R"({"prompt": "x", "top_p": 0})", "top_p must be in (0, 1], got 0.0.", "top_p"},
      {R"({"prompt": "x", "top_p": 1.5})", "top_p must be in (0, 1], got 1.5.", "top_p"},
      {R"({"prompt": "x", "top_k": -2})", "top_k must be -1 or 0 (disabled), or at least 1, got -2.", "top_k"},
      {R"({"prompt": "x", "logprobs": -2})", "logprobs must be a non-negative integer or -1, got -2.", "logprobs"},
      {R"({"prompt": "x", "logprobs": 21})", "Requested sample logprobs of 21, which is greater than max allowed: 20",
       "logprobs"},
      {R"({"prompt": "x", "logprobs": -1})",
       "Requested sample logprobs of -1 (the whole vocabulary), which is greater than max allowed: 20", "logprobs"},
      {R"({"prompt": "x", "prompt_logprobs": -2})", "`prompt_logprobs` must be a positive value or -1.",
       "prompt_logprobs"},
      {R"({"prompt": "x", "prompt_logprobs": 21})",
       "Requested prompt logprobs of 21, which is greater than max allowed: 20", "prompt_logprobs"},
      {R"({"prompt": "x", "prompt_logprobs": 1, "stream": true})",
       "`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs"},
      {R"({"prompt": "x", "echo": true, "stream": true})",
       "echo=true is not supported with stream=true by rlcore serve.", "echo"},
  });
  // The edges that are allowed.
  CHECK(parse(R"({"prompt": "x", "n": 128, "top_p": 1, "top_k": 1, "logprobs": 0})").n == 128);
  CHECK(parse(R"({"prompt": "x", "prompt_logprobs": 20})").prompt_logprobs == 20);
  CHECK(parse(R"({"prompt": "x", "echo": true})").echo);
  CHECK(parse(R"({"prompt": "x", "logprobs": 20})").logprobs == 20);
  CHECK(parse(R"({"prompt": "x", "top_k": -1})").top_k == -1);
}

TEST_CASE("options rlcore does not implement are refused unless at their default", "[serve][requests]") {
  check_rejections({
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})",
       "Stream options can only be defined when `stream=True`.", "stream_options"},
      {R"({"prompt": "x", "stream": true, "stream_options": {"continuous_usage_stats": true}})",
       "stream_options.continuous_usage_stats=true is not supported by rlcore serve.", "stream_options"},
      {R"({"prompt": "x", "stop": ["\n"]})", "stop=[\"\\n\"] is not supported by rlcore serve.", "stop"},
      {R"({"prompt": "x", "stop": "END"})", "stop=\"END\" is not supported by rlcore serve.", "stop"},
      {R"({"prompt": "x", "best_of": 2})", "best_of=2 is not supported by rlcore serve.", "best_of"},
      {R"({"prompt": "x", "suffix": "s"})", "suffix=\"s\" is not supported by rlcore serve.", "suffix"},
      {R"({"prompt": "x", "presence_penalty": 0.5})", "presence_penalty=0.5 is not supported by rlcore serve.",
       "presence_penalty"},
      {R"({"prompt": "x", "logit_bias": {"5": 1}})", "logit_bias={\"5\":1} is not supported by rlcore serve.",
       "logit_bias"},
      {R"({"prompt": "x", "use_beam_search": true})", "use_beam_search=true is not supported by rlcore serve.",
       "use_beam_search"},
      {R"({"prompt": "x", "response_format": {"type": "json_object"}})",
       "response_format={\"type\":\"json_object\"} is not supported by rlcore serve.", "response_format"},
  });
}

TEST_CASE("request bodies must be JSON objects", "[serve][requests]") {
  using rlcore::serve::parse_json_object;
  for (const char* body : {"", "{", "{\"prompt\": }", "nonsense", "{\"a\": 1} trailing", "{\"temperature\": 1e999}"}) {
    INFO(body);
    try {
      parse_json_object(body);
      FAIL("accepted");
    } catch (const ApiError& e) {
      CHECK(e.status() == 400);
      CHECK_THAT(e.what(), Catch::StartsWith("The request body is not valid JSON: "));
    }
  }
  for (const char* body : {"[1, 2]", "\"text\"", "3", "null"}) {
    INFO(body);
    try {
      parse_json_object(body);
      FAIL("accepted");
    } catch (const ApiError& e) {
      CHECK(std::string(e.what()) == "The request body must be a JSON object.");
    }
  }
  CHECK(parse_json_object(R"({"prompt": "x"})")["prompt"] == "x");
}

TEST_CASE("JSON nested deeper than the bound is a 400 before it is parsed", "[serve][requests]") {
  using rlcore::serve::kMaxJsonDepth;
  using rlcore::serve::parse_json_object;
  const auto nested = [](int64_t depth) {
    return R"({"prompt": "x", "user": )" + std::string(static_cast<size_t>(depth - 1), '[') +
           std::string(static_cast<size_t>(depth - 1), ']') + "}";
  };
  try {
    parse_json_object(nested(kMaxJsonDepth + 1));
    FAIL("accepted");
  } catch (const ApiError& e) {
    CHECK(e.status() == 400);
    CHECK(std::string(e.what()) == "The request body nests JSON deeper than 128 levels.");
  }
  // A million brackets: refused by the count, not by the parser's stack.
  CHECK_THROWS_AS(parse_json_object(nested(1000000)), ApiError);
  // Brackets inside strings (and escaped quotes) are text, not nesting.
  const std::string text = std::string(R"({"prompt": "\"[[[)") + std::string(500, '[') + "\"}";
  CHECK_NOTHROW(parse_json_object(text));
  CHECK_NOTHROW(parse_json_object(nested(kMaxJsonDepth)));
}

TEST_CASE("tokenize and detokenize requests", "[serve][requests]") {
  using rlcore::serve::parse_detokenize_request;
  using rlcore::serve::parse_tokenize_request;
  const auto tokenize = parse_tokenize_request(json::parse(R"({"model": "m", "prompt": "hi"})"));
  CHECK(tokenize.model == "m");
  CHECK(tokenize.prompt == "hi");
  CHECK(tokenize.add_special_tokens);
  CHECK_FALSE(tokenize.return_token_strs);
  CHECK_FALSE(parse_tokenize_request(json::parse(R"({"prompt": "", "add_special_tokens": false})")).add_special_tokens);
  CHECK(parse_detokenize_request(json::parse(R"({"tokens": [1, 2]})")).tokens == std::vector<int64_t>{1, 2});

  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({})", "prompt is required."},
      {R"({"prompt": 5})", "prompt must be a string, got 5."},
      {R"({"prompt": "x", "add_special_tokens": "yes"})", "add_special_tokens must be a boolean, got \"yes\"."},
  };
  for (const auto& [body, message] : cases) {
    INFO(body);
    CHECK(message_of([&body = body] { parse_tokenize_request(json::parse(body)); }) == message);
  }
  CHECK(message_of([] { parse_detokenize_request(json::parse("{}")); }) == "tokens is required.");
  CHECK(message_of([] { parse_detokenize_request(json::parse(R"({"tokens": "1 2"})")); }) ==
        "tokens must be a list of integers, got \"1 2\".");
  CHECK(message_of([] { parse_detokenize_request(json::parse(R"({"tokens": [1, -1]})")); }) ==
        "tokens must contain non-negative token ids, got -1.");
  CHECK(message_of([] { parse_detokenize_request(json::parse(R"({"tokens": [1], "model": []})")); }) ==
        "model must be a string, got [].");
}
