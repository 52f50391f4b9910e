// The /v1/completions body the bridge sends and how it reads the answer,
// including answers no well-behaved server gives.
#include "bridge_testing.h"

#include "completion_protocol.h"

using nlohmann::json;
using rlcore::infer_vllm_bridge::completion_request;
using rlcore::infer_vllm_bridge::parse_completion_response;

namespace {

json choice(int64_t index, json token_ids, json token_logprobs, const char* finish = "stop") {
  return {{"index", index},
          {"text", ""},
          {"token_ids", std::move(token_ids)},
          {"logprobs", {{"token_logprobs", std::move(token_logprobs)}, {"tokens", json::array()}}},
          {"finish_reason", finish}};
}

json response(json choices) { return {{"object", "text_completion"}, {"choices", std::move(choices)}}; }

std::string format_error(const json& body, std::size_t prompts, int64_t n) {
  try {
    parse_completion_response(body, prompts, n);
  } catch (const rlcore::FormatError& e) {
    return e.what();
  }
  return "(no FormatError)";
}

}  // namespace

TEST_CASE("the completion request carries the sampling as vLLM names it", "[vllm_bridge]") {
  rlcore::SamplingParams sampling;
  sampling.n = 4;
  sampling.max_tokens = 32;
  sampling.temperature = 0.6;
  sampling.top_p = 0.9;
  sampling.top_k = 20;
  sampling.stop_token_ids = {2, 7};
  const json body = completion_request("m", {{1, 2, 3}, {4}}, sampling, 11);
  CHECK(body["prompt"] == json::parse("[[1,2,3],[4]]"));
  CHECK(body["n"] == 4);
  CHECK(body["max_tokens"] == 32);
  CHECK(body["temperature"] == 0.6);
  CHECK(body["top_p"] == 0.9);
  CHECK(body["top_k"] == 20);
  CHECK(body["seed"] == 11);
  CHECK(body["stop_token_ids"] == json::parse("[2,7]"));
  CHECK(body["logprobs"] == 0);
  CHECK(body["skip_special_tokens"] == true);
  CHECK_FALSE(completion_request("m", {{1}}, sampling, -1).contains("seed"));
}

TEST_CASE("answers are read prompt-major by index, with token ids from either field", "[vllm_bridge]") {
  // Out of order on purpose: only `index` promises the position.
  const json body = response(json::array({choice(1, {5, 6}, {-0.5, -9999.0}, "length"), choice(0, {7}, {-0.25})}));
  const rlcore::GenerationOutput out = parse_completion_response(body, 1, 2);
  CHECK(out.token_ids[0] == std::vector<int32_t>{7});
  CHECK(out.token_ids[1] == std::vector<int32_t>{5, 6});
  CHECK(out.finish_reasons[0] == rlcore::FinishReason::kStop);
  CHECK(out.finish_reasons[1] == rlcore::FinishReason::kLength);
  CHECK(out.logprobs[1][0] == -0.5f);
  CHECK(std::isinf(out.logprobs[1][1]));  // vLLM's -9999.0 stands for -inf

  json without_ids = response(json::array({choice(0, nullptr, {-1.0, -2.0})}));
  without_ids["choices"][0]["logprobs"]["tokens"] = {"token_id:42", "token_id:0"};
  CHECK(parse_completion_response(without_ids, 1, 1).token_ids[0] == std::vector<int32_t>{42, 0});
}

TEST_CASE("malformed answers are format errors naming the choice and field", "[vllm_bridge]") {
  CHECK_THAT(format_error(json{{"id", "x"}}, 1, 1), Catch::Contains("no 'choices'"));
  CHECK_THAT(format_error(response(json::array({choice(0, {1}, {-1.0})})), 2, 1),
             Catch::Contains("1 choices for 2 prompts"));
  CHECK_THAT(format_error(response(json::array({choice(0, {1}, {-1.0}), choice(0, {1}, {-1.0})})), 1, 2),
             Catch::Contains("choices[1].index"));
  CHECK_THAT(format_error(response(json::array({choice(0, {1, -4}, {-1.0, -1.0})})), 1, 1),
             Catch::Contains("token_ids[1]"));
  CHECK_THAT(format_error(response(json::array({choice(0, {1, 2}, {-1.0})})), 1, 1),
             Catch::Contains("1 entries for 2 tokens"));
  CHECK_THAT(format_error(response(json::array({choice(0, {1}, {"nan"})})), 1, 1),
             Catch::Contains("token_logprobs[0]"));
  CHECK_THAT(format_error(response(json::array({choice(0, {1}, {3.5})})), 1, 1), Catch::Contains("not a log-prob"));
  CHECK_THAT(format_error(response(json::array({choice(0, {1}, {-1.0}, "abort")})), 1, 1), Catch::Contains("'abort'"));
  json bad_string = response(json::array({choice(0, nullptr, {-1.0})}));
  bad_string["choices"][0]["logprobs"]["tokens"] = {"hello"};
  CHECK_THAT(format_error(bad_string, 1, 1), Catch::Contains("token_id:<id>"));
  json no_logprobs = response(json::array({choice(0, {1}, {-1.0})}));
  no_logprobs["choices"][0].erase("logprobs");
  CHECK_THAT(format_error(no_logprobs, 1, 1), Catch::Contains(".logprobs is missing"));
}
