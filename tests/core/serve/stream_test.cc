// Streamed completions: vLLM's server-sent events (framing, chunk fields,
// interleaved choices, finish on the last chunk, the usage chunk, [DONE]) and
// text that concatenates to exactly the non-streamed answer's.
#include "serve_testing.h"

#include <stdexcept>

#include <nlohmann/json.hpp>

#include "rlcore/core/serve/api.h"
#include "rlcore/core/serve/responses.h"
#include "rlcore/core/serve/stream.h"
#include "rlcore/error.h"

#include "../../common/reference_python.h"

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

// An engine whose every generation fails with `Failure(message)`.
template <class Failure>
class FailingStreamEngine : public rlcore::InferenceEngine {
 public:
  explicit FailingStreamEngine(std::string message) : message_(std::move(message)) {}
  rlcore::GenerationOutput generate(const std::vector<std::vector<int32_t>>&, const rlcore::SamplingParams&) override {
    throw Failure(message_);
  }
  std::vector<rlcore::WeightMeta> weight_meta() const override { return {}; }
  void load_weights(const rlcore::NamedTensorList&, int64_t) override {}
  int64_t weight_version() const override { return 0; }
  void sleep() override {}
  void wake_up() override {}

 private:
  std::string message_;
};

// What came back over one HTTP/1.1 exchange on a plain socket: the head, and
// the body's transfer chunks as sent (the chunked encoding undone by hand).
struct RawExchange {
  std::string head;
  std::vector<std::string> chunks;
};

RawExchange raw_post(int port, const std::string& path, const std::string& body) {
  const std::string bytes = rlcore_test::raw_http(
      port, "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
  RawExchange exchange;
  const std::size_t head_end = bytes.find("\r\n\r\n");
  REQUIRE(head_end != std::string::npos);
  exchange.head = bytes.substr(0, head_end + 2);
  for (std::size_t at = head_end + 4;;) {
    const std::size_t size_end = bytes.find("\r\n", at);
    REQUIRE(size_end != std::string::npos);
    const std::size_t size = std::stoul(bytes.substr(at, size_end - at), nullptr, 16);
    if (size == 0) {
      CHECK(bytes.substr(size_end) == "\r\n\r\n");  // the last chunk, no trailers
      break;
    }
    exchange.chunks.push_back(bytes.substr(size_end + 2, size));
    REQUIRE(bytes.compare(size_end + 2 + size, 2, "\r\n") == 0);
    at = size_end + 2 + size + 2;
  }
  return exchange;
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

TEST_CASE("on the wire: one event per HTTP chunk, exactly vLLM's framing", "[serve][stream]") {
  rlcore::Registry registry;
  rlcore_test::RunningServer server(rlcore_test::make_scripted_engine(registry));
  const RawExchange exchange = raw_post(server.port(), "/v1/completions",
                                        R"({"prompt": "Question: 1", "n": 2, "max_tokens": 2, "stream": true,
                                            "stream_options": {"include_usage": true}})");
  INFO(exchange.head);
  CHECK(exchange.head.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK_THAT(exchange.head, Catch::Contains("\r\nContent-Type: text/event-stream\r\n"));
  CHECK_THAT(exchange.head, Catch::Contains("\r\nTransfer-Encoding: chunked\r\n"));
  CHECK_THAT(exchange.head, !Catch::Contains("Content-Length"));
  // 2 choices x 2 tokens, the usage chunk, [DONE]; each its own transfer chunk.
  REQUIRE(exchange.chunks.size() == 6);
  for (std::size_t c = 0; c + 1 < exchange.chunks.size(); ++c) {
    const std::string& event = exchange.chunks[c];
    INFO(event);
    REQUIRE(event.rfind("data: {", 0) == 0);
    REQUIRE(event.size() > 8);
    CHECK(event.compare(event.size() - 3, 3, "}\n\n") == 0);
    CHECK(event.find('\n') == event.size() - 2);  // one line of compact JSON
    const json chunk = json::parse(event.substr(6));
    CHECK(chunk["object"] == "text_completion");
    CHECK(chunk["choices"].size() == (c < 4 ? 1u : 0u));
    if (c < 4) CHECK(chunk["choices"][0]["index"] == c % 2);  // interleaved by index
  }
  CHECK(exchange.chunks.back() == "data: [DONE]\n\n");
}

TEST_CASE("a generation that fails ends the stream as vLLM's does: an error event, then [DONE]", "[serve][stream]") {
  SECTION("the engine's fault: 500 InternalServerError") {
    rlcore_test::RunningServer server(std::make_shared<FailingStreamEngine<std::runtime_error>>("device lost"));
    const RawExchange streamed = raw_post(server.port(), "/v1/completions", R"({"prompt": "x", "stream": true})");
    CHECK(streamed.head.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    CHECK_THAT(streamed.head, Catch::Contains("\r\nContent-Type: text/event-stream\r\n"));
    const std::string error = rlcore::serve::error_text(500, "InternalServerError", "device lost");
    CHECK(streamed.chunks == std::vector<std::string>{"data: {\"error\":" + error + "}\n\n", "data: [DONE]\n\n"});
    // Not streamed, the same failure is the status and body.
    auto whole = server.client().Post("/v1/completions", R"({"prompt": "x"})", "application/json");
    REQUIRE(whole);
    CHECK(whole->status == 500);
    CHECK(whole->body == error);
  }
  SECTION("a limit the engine enforces: 400 BadRequestError") {
    rlcore_test::RunningServer server(std::make_shared<FailingStreamEngine<rlcore::ValueError>>("too many sequences"));
    const RawExchange streamed = raw_post(server.port(), "/v1/completions", R"({"prompt": "x", "stream": true})");
    const json error = json::parse(streamed.chunks.at(0).substr(6))["error"];
    CHECK(error["object"] == "error");
    CHECK(error["type"] == "BadRequestError");
    CHECK(error["code"] == 400);
    CHECK(error["message"] == "too many sequences");
    CHECK(streamed.chunks.at(1) == "data: [DONE]\n\n");
  }
  SECTION("the openai client raises APIError with the message") {
    rlcore_test::RunningServer server(std::make_shared<FailingStreamEngine<std::runtime_error>>("device lost"));
    const json seen =
        json::parse(rlcore_test::run_reference(rlcore_test::reference_script("core/serve/reference/openai_client.py"),
                                               {std::to_string(server.port()), "tiny", "--stream-error"}));
    CHECK(seen == json{{"error", "APIError"}, {"message", "device lost"}, {"code", 500}, {"chunks", 0}});
  }
}

TEST_CASE("streamed tokens come step by step, samples interleaved, each sample's last marked", "[serve][stream]") {
  const rlcore::Tokenizer tokenizer = rlcore::make_builtin_tokenizer();
  const std::vector<int32_t> ab = tokenizer.encode("ab", false);
  const int32_t eos = *tokenizer.eos_token_id();
  rlcore::GenerationOutput output;
  output.token_ids = {{ab[0], eos}, {ab[0], ab[0], ab[0]}, {eos}};
  const std::vector<std::vector<int32_t>> shown = {{ab[0]}, output.token_ids[1], {}};  // stop tokens not shown
  const auto tokens = streamed_tokens(output, shown, tokenizer, true);
  std::vector<std::pair<std::size_t, std::size_t>> order;
  for (const auto& token : tokens) order.emplace_back(token.sample, token.position);
  CHECK(order == std::vector<std::pair<std::size_t, std::size_t>>{{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {1, 2}});
  std::vector<bool> last;
  for (const auto& token : tokens) last.push_back(token.last);
  CHECK(last == std::vector<bool>{false, false, true, true, false, true});
  const std::string a = tokenizer.decode({ab[0]});
  CHECK(tokens[0].text == a);
  CHECK(tokens[2].text == "");  // a dropped stop token adds no text
  CHECK(tokens[3].text == "");
  CHECK(tokens[5].text == a);
}

TEST_CASE("a live stream fed token by token sends the events of the finished answer", "[serve][stream]") {
  rlcore::Registry registry;
  auto engine = rlcore_test::make_scripted_engine(registry);
  const ServedModel model = rlcore_test::test_model();
  for (const char* body :
       {R"({"prompt": ["Question: 1", "Question: 22"], "n": 2, "max_tokens": 6, "stream": true, "logprobs": 0,
            "return_token_ids": true, "stream_options": {"include_usage": true}})",
        R"({"prompt": "Question: 1", "max_tokens": 10, "stream": true})"}) {
    INFO(body);
    const CompletionRequest request = parse_completion_request(json::parse(body));
    const PreparedCompletion prepared = prepare_completion(request, model);
    const rlcore::GenerationOutput output = engine->generate(prepared.prompt_token_ids, prepared.sampling);
    const std::vector<std::string> whole = build_completion_stream(request, prepared, output, model, "cmpl-1", 7);

    // The same tokens as an engine that runs requests hands them over: step by step.
    LiveStream live(completion_stream_encoder(request, prepared, model, "cmpl-1", 7), request, prepared, model);
    std::vector<std::string> events = live.begin();
    std::size_t longest = 0;
    for (const auto& ids : output.token_ids) longest = std::max(longest, ids.size());
    for (std::size_t t = 0; t < longest; ++t) {
      for (std::size_t k = 0; k < output.token_ids.size(); ++k) {
        if (t >= output.token_ids[k].size()) continue;
        const bool last = t + 1 == output.token_ids[k].size();
        events.push_back(live.token(k, output.token_ids[k][t], output.logprobs[k][t], rlcore::TopLogprobs{},
                                    last ? std::optional(output.finish_reasons[k]) : std::nullopt));
      }
    }
    for (std::string& event : live.end()) events.push_back(std::move(event));
    CHECK(events == whole);
  }
}
