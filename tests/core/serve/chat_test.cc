// /v1/chat/completions: messages through the checkpoint's chat template, vLLM's
// chat.completion object and chunks, and the errors a chat request can meet.
#include "serve_testing.h"

#include <nlohmann/json.hpp>

#include "rlcore/core/chat/chat_template.h"
#include "rlcore/core/serve/chat.h"

using namespace rlcore::serve;
using nlohmann::json;

namespace {

constexpr const char* kChatMl =
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

ServedModel chat_model(const std::string& source = kChatMl) {
  ServedModel model = rlcore_test::test_model(256);
  model.chat_template =
      std::make_shared<const rlcore::chat::ChatTemplate>(rlcore::chat::ChatTemplate::from_string(source));
  return model;
}

std::shared_ptr<OpenAiApi> chat_api(rlcore::Registry& registry, ServedModel model) {
  return std::make_shared<OpenAiApi>(rlcore_test::make_scripted_engine(registry), std::move(model));
}

std::vector<json> chunks_of(const ApiResponse& answer) {
  std::vector<json> chunks;
  for (const std::string& event : answer.events) {
    REQUIRE(event.rfind("data: ", 0) == 0);
    const std::string payload = event.substr(6, event.size() - 8);
    if (payload != "[DONE]") chunks.push_back(json::parse(payload));
  }
  REQUIRE(answer.events.back() == "data: [DONE]\n\n");
  return chunks;
}

}  // namespace

TEST_CASE("a chat completion renders the messages with the checkpoint's template", "[serve][chat]") {
  rlcore::Registry registry;
  const auto api = chat_api(registry, chat_model());
  const ApiResponse answer = api->chat_completions(
      R"({"messages": [{"role": "user", "content": "Question: 1"}], "n": 2, "max_completion_tokens": 5, "logprobs": true})");
  INFO(answer.body);
  REQUIRE(answer.status == 200);
  const json body = json::parse(answer.body);
  CHECK(body["object"] == "chat.completion");
  CHECK(body["id"].get<std::string>().rfind("chatcmpl-", 0) == 0);
  REQUIRE(body["choices"].size() == 2);
  const json& message = body["choices"][0]["message"];
  CHECK(message["role"] == "assistant");
  CHECK(message["content"] == "ab");  // the scripted engine's text; EOS stops it
  CHECK(body["choices"][0]["finish_reason"] == "stop");
  CHECK(body["choices"][0]["logprobs"]["content"][0]["token"] == "a");
  const ServedModel model = chat_model();
  CHECK(body["usage"]["prompt_tokens"] ==
        model.tokenizer.encode("<|im_start|>user\nQuestion: 1<|im_end|>\n<|im_start|>assistant\n").size());

  const ApiResponse streamed = api->chat_completions(
      R"({"messages": [{"role": "user", "content": "Question: 1"}], "n": 2, "max_tokens": 5, "stream": true,
          "stream_options": {"include_usage": true}})");
  REQUIRE(streamed.status == 200);
  const std::vector<json> chunks = chunks_of(streamed);
  CHECK(chunks[0]["object"] == "chat.completion.chunk");
  CHECK(chunks[0]["choices"][0]["delta"] == json{{"role", "assistant"}, {"content", ""}});
  CHECK(chunks[1]["choices"][0]["delta"]["role"] == "assistant");
  std::string content0;
  for (std::size_t c = 2; c + 1 < chunks.size(); ++c) {
    if (chunks[c]["choices"][0]["index"] == 0)
      content0 += chunks[c]["choices"][0]["delta"]["content"].get<std::string>();
  }
  CHECK(content0 == "ab");
  CHECK(chunks.back()["choices"] == json::array());
  CHECK(chunks.back()["usage"] == body["usage"]);
}

TEST_CASE("chat requests a template or the server cannot serve are 400s naming why", "[serve][chat]") {
  rlcore::Registry registry;
  const auto raising = chat_api(registry, chat_model("{{ raise_exception('Conversation roles must alternate') }}"));
  ApiResponse answer = raising->chat_completions(R"({"messages": [{"role": "user", "content": "x"}]})");
  CHECK(answer.status == 400);
  CHECK_THAT(answer.body, Catch::Contains("Conversation roles must alternate"));

  ServedModel without_template = rlcore_test::test_model();
  const auto plain = chat_api(registry, without_template);
  answer = plain->chat_completions(R"({"messages": [{"role": "user", "content": "x"}]})");
  CHECK(answer.status == 400);
  CHECK_THAT(answer.body, Catch::Contains("no chat template"));

  const auto api = chat_api(registry, chat_model());
  for (const auto& [body, needle] : std::vector<std::pair<std::string, std::string>>{
           {R"({"messages": []})", "messages must be a non-empty list"},
           {R"({"prompt": "x"})", "messages must be a non-empty list"},
           {R"({"messages": [{"content": "x"}]})", "string role"},
           {R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]})", "content parts"},
           {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})", "tool_choice"},
           {R"({"messages": [{"role": "user", "content": "x"}], "continue_final_message": true})",
            "continue_final_message"},
           {R"({"messages": [{"role": "user", "content": "x"}], "n": 0})", "n must be at least 1"},
           {R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": [1]})", "chat_template_kwargs"},
           {"{not json", "not valid JSON"},
           {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 1000000})",
            "Requested sample logprobs of 1000000, which is greater than max allowed: 20"},
           {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": -1})",
            "Requested sample logprobs of -1 (the whole vocabulary)"},
           {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": -2})",
            "`top_logprobs` must be a positive value or -1."},
           {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3})",
            "when using `top_logprobs`, `logprobs` must be set to true."},
           {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": "3"})",
            "top_logprobs must be an integer"},
           {R"({"messages": [{"role": "user", "content": "x"}], "echo": true})",
            "echo=true is not supported by rlcore serve."},
           // The scripted engine reports only the sampled token's log-prob.
           {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 2})",
            "the served engine reports only the sampled token's log-prob: logprobs needs an engine that reports "
            "log-probs (infer-native)."},
           {R"({"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": 0})",
            "prompt_logprobs needs an engine that reports log-probs"}}) {
    INFO(body);
    answer = api->chat_completions(body);
    CHECK(answer.status == 400);
    CHECK_THAT(answer.body, Catch::Contains(needle));
  }
}

TEST_CASE("/tokenize with messages gives the template's prompt ids", "[serve][chat]") {
  rlcore::Registry registry;
  const auto api = chat_api(registry, chat_model());
  const ApiResponse answer =
      api->tokenize(R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": false})");
  REQUIRE(answer.status == 200);
  const ServedModel model = chat_model();
  CHECK(json::parse(answer.body)["tokens"] == json(model.tokenizer.encode("<|im_start|>user\nhi<|im_end|>\n")));
}
