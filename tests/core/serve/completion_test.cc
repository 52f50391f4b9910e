// From a parsed request to engine input and from engine output to vLLM's
// response: tokenization, limits against the model, stop handling, log-probs.
#include "serve_testing.h"

#include <nlohmann/json.hpp>

#include "rlcore/core/serve/api_error.h"
#include "rlcore/core/serve/responses.h"

using namespace rlcore::serve;
using nlohmann::json;
using rlcore::FinishReason;
using rlcore::GenerationOutput;
using rlcore_test::test_model;

namespace {

CompletionRequest request_of(const std::string& text) { return parse_completion_request(json::parse(text)); }

ApiError rejection(const std::string& text, const ServedModel& model) {
  try {
    prepare_completion(request_of(text), model);
  } catch (const ApiError& e) {
    return e;
  }
  FAIL("accepted: " << text);
  return ApiError(0, "", "");
}

}  // namespace

TEST_CASE("prepare_completion tokenizes text and passes token ids through", "[serve][completion]") {
  const auto model = test_model();
  const auto prepared = prepare_completion(request_of(R"({"prompt": ["Question", "1 + 2"]})"), model);
  REQUIRE(prepared.prompt_token_ids.size() == 2);
  CHECK(prepared.prompt_token_ids[0] == model.tokenizer.encode("Question"));
  CHECK(prepared.prompt_token_ids[1] == model.tokenizer.encode("1 + 2"));
  const auto ids = prepare_completion(request_of(R"({"prompt": [[7, 8], [9]]})"), model).prompt_token_ids;
  CHECK(ids == std::vector<std::vector<int32_t>>{{7, 8}, {9}});
}

TEST_CASE("prepare_completion maps the sampling fields and adds EOS unless ignore_eos", "[serve][completion]") {
  const auto model = test_model();
  const int32_t eos = model.eos_token_ids.at(0);
  auto sampling = prepare_completion(request_of(R"({"prompt": "x", "n": 3, "max_tokens": 5, "temperature": 0.5,
      "top_p": 0.9, "top_k": 4, "seed": 11, "stop_token_ids": [7, 7, 8]})"),
                                     model)
                      .sampling;
  CHECK(sampling.n == 3);
  CHECK(sampling.max_tokens == 5);
  CHECK(sampling.temperature == 0.5);
  CHECK(sampling.top_p == 0.9);
  CHECK(sampling.top_k == 4);
  CHECK(sampling.seed == 11);
  CHECK(sampling.stop_token_ids == std::vector<int32_t>{7, 8, eos});

  const auto ignoring = request_of(R"({"prompt": "x", "stop_token_ids": [7], "ignore_eos": true})");
  sampling = prepare_completion(ignoring, model).sampling;
  CHECK(sampling.stop_token_ids == std::vector<int32_t>{7});
  CHECK(sampling.seed == -1);  // no seed: nondeterministic
}

TEST_CASE("prepare_completion checks the prompt against the model", "[serve][completion]") {
  const auto model = test_model(/*max_model_len=*/10);
  const std::string vocab = std::to_string(model.vocab_size);
  struct Case {
    std::string body, message, param;
  };
  const std::vector<Case> cases = {
      {R"({"prompt": [1, )" + vocab + R"(], "max_tokens": 1})", "Token id " + vocab + " is out of vocabulary",
       "prompt"},
      {R"({"prompt": "x", "max_tokens": 1, "stop_token_ids": [)" + vocab + "]}",
       "Token id " + vocab + " is out of vocabulary", "stop_token_ids"},
      {R"({"prompt": ["x", " "], "max_tokens": 1, "add_special_tokens": false, "extra": 1})", "", ""},  // accepted
      {R"({"prompt": [[1], []], "max_tokens": 1})", "The decoder prompt cannot be empty", "prompt"},
      {R"({"prompt": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "max_tokens": 1})",
       "This model's maximum context length is 10 tokens. However, your request has 10 input tokens. "
       "Please reduce the length of the input messages.",
       "input_tokens"},
      {R"({"prompt": [1, 2, 3, 4], "max_tokens": 7})",
       "'max_tokens' or 'max_completion_tokens' is too large: 7. This model's maximum context length is 10 "
       "tokens and your request has 4 input tokens (7 > 10 - 4).",
       "max_tokens"},
  };
  for (const auto& c : cases) {
    INFO(c.body);
    if (c.message.empty()) {
      CHECK(prepare_completion(request_of(c.body), model).prompt_token_ids.size() == 2);
      continue;
    }
    const ApiError error = rejection(c.body, model);
    CHECK(error.status() == 400);
    CHECK(std::string(error.what()) == c.message);
    CHECK(error.param() == c.param);
  }
  // Exactly at the limit is fine.
  CHECK(prepare_completion(request_of(R"({"prompt": [1, 2, 3, 4], "max_tokens": 6})"), model).sampling.max_tokens == 6);
}

TEST_CASE("check_model_name accepts the served name or none, else 404", "[serve][completion]") {
  const auto model = test_model();
  CHECK_NOTHROW(check_model_name("", model));
  CHECK_NOTHROW(check_model_name("tiny", model));
  try {
    check_model_name("gpt-4", model);
    FAIL("accepted another model");
  } catch (const ApiError& e) {
    CHECK(e.status() == 404);
    CHECK(e.type() == "NotFoundError");
    CHECK(e.param() == "model");
    CHECK(std::string(e.what()) == "The model `gpt-4` does not exist.");
    const json body = error_body(e);
    CHECK(body == json{{"object", "error"},
                       {"message", "The model `gpt-4` does not exist."},
                       {"type", "NotFoundError"},
                       {"param", "model"},
                       {"code", 404}});
  }
  CHECK(error_body(400, "BadRequestError", "m")["param"].is_null());
}

TEST_CASE("build_completion_response: prompt-major choices, stop handling, usage", "[serve][completion]") {
  const auto model = test_model();
  const auto& tokenizer = model.tokenizer;
  const int32_t eos = model.eos_token_ids.at(0);
  const auto a = tokenizer.encode("a").at(0), b = tokenizer.encode("b").at(0), c = tokenizer.encode("c").at(0);
  const auto request = request_of(R"({"prompt": [[1, 2], [3]], "n": 2, "stop_token_ids": [)" + std::to_string(c) +
                                  R"(], "return_token_ids": true})");
  const auto prepared = prepare_completion(request, model);
  GenerationOutput output;
  output.token_ids = {{a, b, eos}, {a, c}, {b, b}, {c}};
  output.logprobs = {{-1, -2, -3}, {-1, -2}, {-1, -2}, {-1}};
  output.finish_reasons = {FinishReason::kStop, FinishReason::kStop, FinishReason::kLength, FinishReason::kStop};

  const json response = build_completion_response(request, prepared, output, model, "cmpl-x", 123);
  CHECK(response["id"] == "cmpl-x");
  CHECK(response["object"] == "text_completion");
  CHECK(response["created"] == 123);
  CHECK(response["model"] == "tiny");
  const json& choices = response["choices"];
  REQUIRE(choices.size() == 4);
  for (std::size_t k = 0; k < 4; ++k) {
    CHECK(choices[k]["index"] == k);
    CHECK(choices[k]["logprobs"].is_null());
    CHECK(choices[k]["prompt_logprobs"].is_null());
    CHECK(choices[k]["token_ids"] == output.token_ids[k]);
  }
  // EOS and stop tokens stay in token_ids but leave the text; stop_reason names
  // a stop token but not EOS.
  CHECK(choices[0]["text"] == "ab");
  CHECK(choices[0]["finish_reason"] == "stop");
  CHECK(choices[0]["stop_reason"].is_null());
  CHECK(choices[1]["text"] == "a");
  CHECK(choices[1]["stop_reason"] == c);
  CHECK(choices[2]["text"] == "bb");
  CHECK(choices[2]["finish_reason"] == "length");
  CHECK(choices[2]["stop_reason"].is_null());
  CHECK(choices[3]["text"] == "");
  CHECK(choices[0]["prompt_token_ids"] == std::vector<int32_t>{1, 2});
  CHECK(choices[1]["prompt_token_ids"] == std::vector<int32_t>{1, 2});
  CHECK(choices[2]["prompt_token_ids"] == std::vector<int32_t>{3});
  CHECK(response["usage"]["prompt_tokens"] == 3);  // per prompt, not per sample
  CHECK(response["usage"]["completion_tokens"] == 8);
  CHECK(response["usage"]["total_tokens"] == 11);

  // include_stop_str_in_output keeps the stop token's text; skip_special_tokens=false shows EOS.
  auto keep = request_of(R"({"prompt": [[1, 2], [3]], "n": 2, "include_stop_str_in_output": true,
                             "skip_special_tokens": false})");
  const json kept = build_completion_response(keep, prepared, output, model, "cmpl-y", 1);
  CHECK(kept["choices"][1]["text"] == "ac");
  CHECK(kept["choices"][0]["text"] == "ab" + tokenizer.id_to_token(eos));
  CHECK(kept["choices"][0]["token_ids"].is_null());
  CHECK(kept["choices"][0]["prompt_token_ids"].is_null());
}

TEST_CASE("build_completion_response: logprobs as vLLM's CompletionLogProbs", "[serve][completion]") {
  const auto model = test_model();
  const auto ids = model.tokenizer.encode("Question");
  REQUIRE(ids.size() >= 1);
  const std::vector<int32_t> sample = {ids[0], model.tokenizer.encode("é").at(0)};
  GenerationOutput output;
  output.token_ids = {sample};
  output.logprobs = {{-0.25f, -std::numeric_limits<float>::infinity()}};
  output.finish_reasons = {FinishReason::kLength};

  auto request = request_of(R"({"prompt": [1], "logprobs": 0})");
  const auto prepared = prepare_completion(request, model);
  json logprobs = build_completion_response(request, prepared, output, model, "id", 0)["choices"][0]["logprobs"];
  const std::string first = model.tokenizer.decode(std::vector<int32_t>{sample[0]});
  const std::string second = model.tokenizer.decode_lossy(std::vector<int32_t>{sample[1]});
  CHECK(logprobs["tokens"] == json{first, second});
  CHECK(logprobs["token_logprobs"] == json{-0.25, -9999.0});  // -inf clamped as vLLM does
  CHECK(logprobs["top_logprobs"] == json{{{first, -0.25}}, {{second, -9999.0}}});
  CHECK(logprobs["text_offset"] == json{0, first.size()});  // ASCII: bytes == code points

  request = request_of(R"({"prompt": [1], "logprobs": 5, "return_tokens_as_token_ids": true})");
  logprobs = build_completion_response(request, prepared, output, model, "id", 0)["choices"][0]["logprobs"];
  const std::string as_id0 = "token_id:" + std::to_string(sample[0]);
  const std::string as_id1 = "token_id:" + std::to_string(sample[1]);
  CHECK(logprobs["tokens"] == json{as_id0, as_id1});
  CHECK(logprobs["text_offset"] == json{0, as_id0.size()});
  CHECK(logprobs["top_logprobs"][1] == json{{as_id1, -9999.0}});
}

TEST_CASE("build_completion_response: the most likely tokens, echo and prompt_logprobs as vLLM",
          "[serve][completion]") {
  const auto model = test_model();
  const int32_t a = model.tokenizer.encode("a").at(0), b = model.tokenizer.encode("b").at(0),
                c = model.tokenizer.encode("c").at(0);
  auto text = [&](int32_t id) { return model.tokenizer.decode(std::vector<int32_t>{id}); };
  GenerationOutput output;
  output.token_ids = {{b, c}};
  output.logprobs = {{-0.5f, -1.5f}};
  output.finish_reasons = {FinishReason::kLength};
  ReportedLogprobs reported;
  // Sampled b (also the most likely there), then c (second after a).
  reported.top = {{rlcore::TopLogprobs{{b, a}, {-0.5f, -1.0f}}, rlcore::TopLogprobs{{a, c}, {-0.25f, -1.5f}}}};
  // The prompt [a, b, a]: b after a (rank 2), a after b (rank 1).
  reported.prompt = {{rlcore::PositionLogprobs{-2.0f, 2, {{c, b}, {-0.125f, -2.0f}}},
                      rlcore::PositionLogprobs{-0.375f, 1, {{a, c}, {-0.375f, -3.0f}}}}};

  auto request = request_of(R"({"prompt": [0], "logprobs": 2})");
  request.prompts = {PromptInput{std::nullopt, {a, b, a}}};
  auto prepared = prepare_completion(request, model);
  json choice = build_completion_response(request, prepared, output, model, "id", 0, reported)["choices"][0];
  CHECK(choice["logprobs"]["token_logprobs"] == json{-0.5, -1.5});
  CHECK(choice["logprobs"]["top_logprobs"][0] == json{{text(b), -0.5}, {text(a), -1.0}});
  CHECK(choice["logprobs"]["top_logprobs"][1] == json{{text(c), -1.5}, {text(a), -0.25}});
  CHECK(choice["prompt_logprobs"].is_null());

  // lm-eval's loglikelihood request: echo with logprobs puts the prompt's first.
  request = request_of(R"({"prompt": [0], "logprobs": 1, "echo": true, "prompt_logprobs": 2})");
  request.prompts = {PromptInput{std::nullopt, {a, b, a}}};
  prepared = prepare_completion(request, model);
  CHECK(prepared.prompt_logprobs == 2);
  choice = build_completion_response(request, prepared, output, model, "id", 0, reported)["choices"][0];
  CHECK(choice["text"] == text(a) + text(b) + text(a) + text(b) + text(c));
  CHECK(choice["logprobs"]["tokens"] == json{text(a), text(b), text(a), text(b), text(c)});
  CHECK(choice["logprobs"]["token_logprobs"] == json{nullptr, -2.0, -0.375, -0.5, -1.5});
  CHECK(choice["logprobs"]["top_logprobs"][0].is_null());
  CHECK(choice["logprobs"]["top_logprobs"][1] == json{{text(b), -2.0}, {text(c), -0.125}});
  CHECK(choice["logprobs"]["top_logprobs"][4] == json{{text(c), -1.5}, {text(a), -0.25}});
  const json& prompt = choice["prompt_logprobs"];
  REQUIRE(prompt.size() == 3);
  CHECK(prompt[0].is_null());
  CHECK(prompt[1][std::to_string(b)] == json{{"logprob", -2.0}, {"rank", 2}, {"decoded_token", text(b)}});
  CHECK(prompt[1][std::to_string(c)] == json{{"logprob", -0.125}, {"rank", 1}, {"decoded_token", text(c)}});
  CHECK(prompt[2].size() == 2);  // a is both the prompt's token and the most likely
  CHECK(prompt[2][std::to_string(a)]["logprob"] == -0.375);

  // Not what the engine reported: an engine fault, not the request's.
  CHECK_THROWS_AS(build_completion_response(request, prepared, output, model, "id", 0, ReportedLogprobs{}),
                  rlcore::Error);
}

TEST_CASE("text_offset counts code points, as Python's len", "[serve][completion]") {
  const auto model = test_model();
  const auto e_acute = model.tokenizer.encode("é");  // two bytes, maybe two tokens
  std::vector<int32_t> sample = e_acute;
  sample.push_back(model.tokenizer.encode("a").at(0));
  GenerationOutput output;
  output.token_ids = {sample};
  output.logprobs = {std::vector<float>(sample.size(), -1.0f)};
  output.finish_reasons = {FinishReason::kLength};
  const auto request = request_of(R"({"prompt": [1], "logprobs": 0})");
  const json response = build_completion_response(request, prepare_completion(request, model), output, model, "id", 0);
  CHECK(response["choices"][0]["text"] == "éa");
  const json& offsets = response["choices"][0]["logprobs"]["text_offset"];
  int64_t expected = 0;
  for (std::size_t i = 0; i < sample.size(); ++i) {
    CHECK(offsets[i] == expected);
    // Each token string is valid UTF-8 (lossy), so its code points are its non-continuation bytes.
    const std::string token = response["choices"][0]["logprobs"]["tokens"][i];
    expected += std::count_if(token.begin(), token.end(), [](char ch) { return (ch & 0xC0) != 0x80; });
  }
  CHECK(offsets.size() == sample.size());
}

TEST_CASE("an engine answer of the wrong shape is an internal error, not a crash", "[serve][completion]") {
  const auto model = test_model();
  const auto request = request_of(R"({"prompt": [[1], [2]], "n": 2})");
  const auto prepared = prepare_completion(request, model);
  GenerationOutput output;
  output.token_ids = {{1}, {1}, {1}};
  output.logprobs = {{-1}, {-1}, {-1}};
  output.finish_reasons = {FinishReason::kLength, FinishReason::kLength, FinishReason::kLength};
  CHECK(rlcore_test::error_of<rlcore::Error>(
            [&] { build_completion_response(request, prepared, output, model, "id", 0); }) ==
        "the engine returned 3 samples, 3 log-prob lists and 3 finish reasons for 2 prompts with n=2 "
        "(expected 4 of each)");
  output.token_ids.push_back({1, 2});
  output.logprobs.push_back({-1});
  output.finish_reasons.push_back(FinishReason::kLength);
  CHECK(rlcore_test::error_of<rlcore::Error>([&] {
          build_completion_response(request, prepared, output, model, "id", 0);
        }) == "the engine returned 1 log-probs for the 2 tokens of sample 3");
}

TEST_CASE("models, tokenize, detokenize and version bodies", "[serve][completion]") {
  const auto model = test_model();
  CHECK(build_models_response(model) ==
        json::parse(R"({"object": "list", "data": [{"id": "tiny", "object": "model", "created": 1700000000,
          "owned_by": "rlcore", "root": "/models/tiny", "parent": null, "max_model_len": 64, "permission": []}]})"));

  const auto ids = model.tokenizer.encode("Question: 1 + 2");
  json tokens = build_tokenize_response(ids, false, model);
  CHECK(tokens["count"] == ids.size());
  CHECK(tokens["max_model_len"] == 64);
  CHECK(tokens["tokens"] == ids);
  CHECK(tokens["token_strs"].is_null());
  tokens = build_tokenize_response(ids, true, model);
  REQUIRE(tokens["token_strs"].size() == ids.size());
  CHECK(tokens["token_strs"][0] == model.tokenizer.id_to_token(ids[0]));

  DetokenizeRequest detokenize;
  detokenize.tokens.assign(ids.begin(), ids.end());
  CHECK(build_detokenize_response(detokenize, model) == json{{"prompt", "Question: 1 + 2"}});
  detokenize.tokens.push_back(model.tokenizer.vocab_size());
  try {
    build_detokenize_response(detokenize, model);
    FAIL("decoded an id outside the vocabulary");
  } catch (const ApiError& e) {
    CHECK(e.status() == 400);
    const std::string id = std::to_string(model.tokenizer.vocab_size());
    CHECK(std::string(e.what()) == "Token id " + id + " is out of vocabulary");
  }
  CHECK(build_version_response()["version"].is_string());
}

TEST_CASE("completion ids look like vLLM's and differ", "[serve][completion]") {
  const std::string first = make_completion_id(), second = make_completion_id();
  CHECK_THAT(first, Catch::Matches("cmpl-[0-9a-f]{32}"));
  CHECK(first != second);
}
