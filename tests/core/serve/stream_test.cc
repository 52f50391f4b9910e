// Streamed completions: vLLM's server-sent events (framing, chunk fields,
// interleaved choices, finish on the last chunk, the usage chunk, [DONE]) and
// text that concatenates to exactly the non-streamed answer's.
#include "serve_testing.h"

#include <nlohmann/json.hpp>

#include "rlcore/core/serve/responses.h"
#include "rlcore/core/serve/stream.h"

using namespace rlcore::serve;
using nlohmann::json;

namespace {

// The JSON chunks of an event stream; checks the framing on the way.
std::vector<json> chunks_of(const std::string& stream) {
  std::vector<json> chunks;
  std::size_t at = 0;
  bool done = false;
  while (at < stream.size()) {
    REQUIRE_FALSE(done);  // nothing after [DONE]
    REQUIRE(stream.compare(at, 6, "data: ") == 0);
    const std::size_t end = stream.find("\n\n", at);
    REQUIRE(end != std::string::npos);
    const std::string payload = stream.substr(at + 6, end - at - 6);
    if (payload == "[DONE]") {
      done = true;
    } else {
      chunks.push_back(json::parse(payload));
    }
    at = end + 2;
  }
  CHECK(done);
  return chunks;
}

std::string joined(const std::vector<std::string>& events) {
  std::string stream;
  for (const auto& event : events) stream += event;
  return stream;
}

struct Answers {
  json whole;
  std::vector<json> chunks;
};

// The same generation answered whole and streamed.
Answers answer_both_ways(const std::string& body) {
  rlcore::Registry registry;
  auto engine = rlcore_test::make_scripted_engine(registry);
  const ServedModel model = rlcore_test::test_model();
  const CompletionRequest request = parse_completion_request(json::parse(body));
  const PreparedCompletion prepared = prepare_completion(request, model);
  const rlcore::GenerationOutput output = engine->generate(prepared.prompt_token_ids, prepared.sampling);
  Answers answers;
  answers.whole = build_completion_response(request, prepared, output, model, "cmpl-1", 7);
  answers.chunks = chunks_of(joined(build_completion_stream(request, prepared, output, model, "cmpl-1", 7)));
  return answers;
}

}  // namespace

TEST_CASE("streamed chunks concatenate to the whole answer, choice by choice", "[serve][stream]") {
  const Answers answers = answer_both_ways(
      R"({"prompt": ["Question: 1", "Question: 2"], "n": 2, "max_tokens": 6, "logprobs": 0, "stream": true,
          "stream_options": {"include_usage": true}, "return_token_ids": true})");
  const json& choices = answers.whole["choices"];
  REQUIRE(choices.size() == 4);
  std::vector<std::string> text(4);
  std::vector<std::vector<int32_t>> ids(4);
  std::vector<json> finish(4, nullptr);
  std::vector<int> chunks_after_finish(4, 0);
  std::vector<int64_t> next_offset(4, 0);
  for (std::size_t c = 0; c + 1 < answers.chunks.size(); ++c) {
    const json& chunk = answers.chunks[c];
    CHECK(chunk["id"] == "cmpl-1");
    CHECK(chunk["object"] == "text_completion");
    CHECK(chunk["created"] == 7);
    CHECK(chunk["model"] == "tiny");
    CHECK(chunk["usage"].is_null());
    REQUIRE(chunk["choices"].size() == 1);
    const json& choice = chunk["choices"][0];
    const std::size_t k = choice["index"].get<std::size_t>();
    REQUIRE(k < 4);
    if (!finish[k].is_null()) ++chunks_after_finish[k];
    text[k] += choice["text"].get<std::string>();
    ids[k].push_back(choice["token_ids"][0].get<int32_t>());
    CHECK(choice["logprobs"]["text_offset"][0] == next_offset[k]);  // offsets continue across chunks
    next_offset[k] += static_cast<int64_t>(choice["text"].get<std::string>().size());
    CHECK(choice["prompt_token_ids"].is_null() == (ids[k].size() > 1));
    if (!choice["finish_reason"].is_null()) finish[k] = choice["finish_reason"];
  }
  for (std::size_t k = 0; k < 4; ++k) {
    INFO("choice " << k);
    CHECK(text[k] == choices[k]["text"]);
    CHECK(json(ids[k]) == choices[k]["token_ids"]);
    CHECK(finish[k] == choices[k]["finish_reason"]);
    CHECK(chunks_after_finish[k] == 0);
  }
  // Choices interleave step by step, as the engine produces tokens.
  CHECK(answers.chunks[0]["choices"][0]["index"] == 0);
  CHECK(answers.chunks[1]["choices"][0]["index"] == 1);
  // The usage chunk: no choices, the whole request's usage, nothing null.
  const json& usage_chunk = answers.chunks.back();
  CHECK(usage_chunk["choices"] == json::array());
  CHECK(usage_chunk["usage"] == json{{"prompt_tokens", answers.whole["usage"]["prompt_tokens"]},
                                     {"completion_tokens", answers.whole["usage"]["completion_tokens"]},
                                     {"total_tokens", answers.whole["usage"]["total_tokens"]}});
}

TEST_CASE("without include_usage there is no usage chunk; a stop token adds no text", "[serve][stream]") {
  const Answers answers = answer_both_ways(R"({"prompt": "Question: 1", "max_tokens": 10, "stream": true})");
  for (const json& chunk : answers.chunks) CHECK(chunk["choices"].size() == 1);
  const json& last = answers.chunks.back()["choices"][0];
  CHECK(last["finish_reason"] == "stop");  // the script ends in EOS
  CHECK(last["text"] == "");
  std::string text;
  for (const json& chunk : answers.chunks) text += chunk["choices"][0]["text"].get<std::string>();
  CHECK(text == answers.whole["choices"][0]["text"]);
}

TEST_CASE("text deltas hold back a token that ends inside a UTF-8 character", "[serve][stream]") {
  const rlcore::Tokenizer tokenizer = rlcore::make_builtin_tokenizer();
  const std::string text = "é 12 \xE4\xB8\xAD ab";  // two- and three-byte characters
  const std::vector<int32_t> ids = tokenizer.encode(text, /*parse_special_tokens=*/false);
  const std::vector<std::string> deltas = text_deltas(tokenizer, ids, true);
  REQUIRE(deltas.size() == ids.size());
  std::string joined_text;
  for (const auto& delta : deltas) {
    joined_text += delta;
    CHECK(delta.find("\xEF\xBF\xBD") == std::string::npos);  // no replacement character mid-stream
  }
  CHECK(joined_text == tokenizer.decode(ids));
  CHECK(joined_text == text);
}

TEST_CASE("the server sends a stream as text/event-stream, chunk by chunk", "[serve][stream]") {
  rlcore::Registry registry;
  rlcore_test::RunningServer server(rlcore_test::make_scripted_engine(registry));
  auto client = server.client();
  std::vector<std::string> received;
  httplib::Request request;
  request.method = "POST";
  request.path = "/v1/completions";
  request.body = R"({"prompt": "Question: 1", "n": 2, "max_tokens": 4, "stream": true,
                      "stream_options": {"include_usage": true}})";
  request.set_header("Content-Type", "application/json");
  request.content_receiver = [&](const char* data, std::size_t size, uint64_t, uint64_t) {
    received.emplace_back(data, size);
    return true;
  };
  auto result = client.send(request);
  REQUIRE(result);
  CHECK(result->status == 200);
  CHECK(result->get_header_value("Content-Type") == "text/event-stream");
  CHECK(result->get_header_value("Transfer-Encoding") == "chunked");
  std::string stream;
  for (const auto& piece : received) stream += piece;
  const std::vector<json> chunks = chunks_of(stream);
  REQUIRE(chunks.size() > 2);
  CHECK(received.size() >= chunks.size());  // the events came as separate chunks
  CHECK(chunks.size() - 1 == chunks.back()["usage"]["completion_tokens"].get<std::size_t>());  // one per token
  // A bad streamed request is an ordinary JSON error, before any event.
  auto bad = client.Post("/v1/completions", R"({"prompt": "x", "n": 0, "stream": true})", "application/json");
  REQUIRE(bad);
  CHECK(bad->status == 400);
  CHECK(bad->get_header_value("Content-Type") == "application/json");
}
