// The HTTP server in-process on an ephemeral port, driven with httplib::Client:
// every route, auth on and off, 400/401/404/413/500, concurrent clients, stop.
#include "serve_testing.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "rlcore/core/serve/api.h"
#include "rlcore/core/serve/server.h"
#include "rlcore/error.h"

using namespace rlcore::serve;
using nlohmann::json;
using rlcore_test::RunningServer;
using rlcore_test::ScriptedEngine;

namespace {

std::shared_ptr<ScriptedEngine> scripted_engine(rlcore::Registry& registry) {
  return rlcore_test::make_scripted_engine(registry);
}

json body_of(const httplib::Result& result) {
  REQUIRE(result);
  return json::parse(result->body);
}

void check_error(const httplib::Result& result, int status, const std::string& type, const std::string& message) {
  REQUIRE(result);
  CHECK(result->status == status);
  CHECK(result->get_header_value("Content-Type") == "application/json");
  const json body = json::parse(result->body);
  CHECK(body["object"] == "error");
  CHECK(body["type"] == type);
  CHECK(body["code"] == status);
  CHECK(body["message"] == message);
  CHECK(body.contains("param"));
}

// Engines that fail, for the 400/500 mapping.
template <class E>
class FailingEngine : public ScriptedEngine {
 public:
  FailingEngine() : ScriptedEngine({1}) {}
  rlcore::GenerationOutput generate(const std::vector<std::vector<int32_t>>&, const rlcore::SamplingParams&) override {
    throw E("engine says no");
  }
};

}  // namespace

TEST_CASE("GET routes: health, version, models", "[serve][server]") {
  rlcore::Registry registry;
  RunningServer server(scripted_engine(registry));
  auto client = server.client();

  auto health = client.Get("/health");
  REQUIRE(health);
  CHECK(health->status == 200);
  CHECK(health->body.empty());

  const json version = body_of(client.Get("/version"));
  CHECK(version["version"].is_string());
  CHECK_FALSE(version["version"].get<std::string>().empty());

  const json models = body_of(client.Get("/v1/models"));
  CHECK(models["object"] == "list");
  REQUIRE(models["data"].size() == 1);
  CHECK(models["data"][0]["id"] == "tiny");
  CHECK(models["data"][0]["object"] == "model");
  CHECK(models["data"][0]["owned_by"] == "rlcore");
  CHECK(models["data"][0]["root"] == "/models/tiny");
  CHECK(models["data"][0]["max_model_len"] == 64);
}

TEST_CASE("POST /v1/completions runs the engine and answers vLLM's shape", "[serve][server]") {
  rlcore::Registry registry;
  auto engine = scripted_engine(registry);
  RunningServer server(engine);
  auto client = server.client();
  const auto tokenizer = rlcore::make_builtin_tokenizer();
  const auto script = rlcore_test::scripted_tokens(tokenizer, "ab");  // a, b, EOS

  const json request = {{"model", "tiny"},
                        {"prompt", {"Question", "1 + 2"}},
                        {"n", 2},
                        {"max_tokens", 5},
                        {"temperature", 0},
                        {"top_k", 0},
                        {"seed", 3},
                        {"logprobs", 0},
                        {"return_token_ids", true}};
  auto result = client.Post("/v1/completions", request.dump(), "application/json");
  REQUIRE(result);
  REQUIRE(result->status == 200);
  CHECK(result->get_header_value("Content-Type") == "application/json");
  const json response = json::parse(result->body);
  CHECK_THAT(response["id"].get<std::string>(), Catch::StartsWith("cmpl-"));
  CHECK(response["object"] == "text_completion");
  CHECK(response["model"] == "tiny");
  CHECK(response["created"].is_number_integer());

  const json& choices = response["choices"];
  REQUIRE(choices.size() == 4);
  for (std::size_t k = 0; k < 4; ++k) CHECK(choices[k]["index"] == k);
  // Sample 0 runs a, b, EOS (stop); sample 1 runs b, EOS (stop).
  CHECK(choices[0]["text"] == "ab");
  CHECK(choices[0]["token_ids"] == script);
  CHECK(choices[0]["finish_reason"] == "stop");
  CHECK(choices[0]["stop_reason"].is_null());
  CHECK(choices[1]["text"] == "b");
  CHECK(choices[0]["prompt_token_ids"] == tokenizer.encode("Question"));
  CHECK(choices[2]["prompt_token_ids"] == tokenizer.encode("1 + 2"));
  CHECK(choices[0]["logprobs"]["token_logprobs"] == json{-0.5, -1.0, -1.5});
  CHECK(choices[0]["logprobs"]["tokens"].size() == 3);
  const auto prompt_tokens = tokenizer.encode("Question").size() + tokenizer.encode("1 + 2").size();
  CHECK(response["usage"]["prompt_tokens"] == prompt_tokens);
  CHECK(response["usage"]["completion_tokens"] == 3 + 2 + 3 + 2);
  CHECK(response["usage"]["total_tokens"] == prompt_tokens + 10);

  // What the engine was asked.
  const auto sampling = engine->last_sampling();
  CHECK(sampling.n == 2);
  CHECK(sampling.max_tokens == 5);
  CHECK(sampling.temperature == 0.0);
  CHECK(sampling.top_k == -1);
  CHECK(sampling.seed == 3);
  CHECK(sampling.stop_token_ids == std::vector<int32_t>{*tokenizer.eos_token_id()});
  CHECK(engine->last_prompts() ==
        std::vector<std::vector<int32_t>>{tokenizer.encode("Question"), tokenizer.encode("1 + 2")});

  // ignore_eos runs to max_tokens.
  const json long_request = {{"prompt", {1, 2}}, {"max_tokens", 4}, {"ignore_eos", true}};
  const json long_response = body_of(client.Post("/v1/completions", long_request.dump(), "application/json"));
  CHECK(long_response["choices"][0]["finish_reason"] == "length");
  CHECK(long_response["choices"][0]["text"] == "aba");  // a b EOS a, EOS skipped as a special token
  CHECK(long_response["choices"][0]["token_ids"].is_null());
  CHECK(long_response["choices"][0]["logprobs"].is_null());
}

TEST_CASE("POST /tokenize and /detokenize round-trip", "[serve][server]") {
  rlcore::Registry registry;
  RunningServer server(scripted_engine(registry));
  auto client = server.client();
  const auto tokenizer = rlcore::make_builtin_tokenizer();

  const json tokens = body_of(client.Post("/tokenize", R"({"prompt": "Question: 12"})", "application/json"));
  CHECK(tokens["tokens"] == tokenizer.encode("Question: 12"));
  CHECK(tokens["count"] == tokenizer.encode("Question: 12").size());
  CHECK(tokens["max_model_len"] == 64);
  CHECK(tokens["token_strs"].is_null());

  const json with_strs = body_of(client.Post(
      "/tokenize", R"({"model": "tiny", "prompt": "ab", "add_special_tokens": false, "return_token_strs": true})",
      "application/json"));
  CHECK(with_strs["token_strs"].size() == with_strs["tokens"].size());

  const json text = body_of(client.Post("/detokenize", json{{"tokens", tokens["tokens"]}}.dump(), "application/json"));
  CHECK(text == json{{"prompt", "Question: 12"}});
}

TEST_CASE("bad requests get 400 and vLLM's error object; the server keeps serving", "[serve][server]") {
  rlcore::Registry registry;
  RunningServer server(scripted_engine(registry));
  auto client = server.client();

  auto result = client.Post("/v1/completions", "{\"prompt\": ", "application/json");
  REQUIRE(result);
  CHECK(result->status == 400);
  CHECK_THAT(json::parse(result->body)["message"].get<std::string>(),
             Catch::StartsWith("The request body is not valid JSON: "));

  check_error(client.Post("/v1/completions", "[]", "application/json"), 400, "BadRequestError",
              "The request body must be a JSON object.");
  check_error(client.Post("/v1/completions", R"({"prompt": "x", "n": 0})", "application/json"), 400, "BadRequestError",
              "n must be at least 1, got 0.");
  check_error(client.Post("/v1/completions", R"({"prompt": "x", "temperature": "warm"})", "application/json"), 400,
              "BadRequestError", "temperature must be a number, got \"warm\".");
  check_error(client.Post("/v1/completions", R"({"prompt": [1], "max_tokens": 64})", "application/json"), 400,
              "BadRequestError",
              "'max_tokens' or 'max_completion_tokens' is too large: 64. This model's maximum context length is 64 "
              "tokens and your request has 1 input tokens (64 > 64 - 1).");
  check_error(client.Post("/v1/completions", R"({"prompt": [99999]})", "application/json"), 400, "BadRequestError",
              "Token id 99999 is out of vocabulary");
  check_error(client.Post("/v1/completions", R"({"prompt": "x", "stream": "yes"})", "application/json"), 400,
              "BadRequestError", "stream must be a boolean, got \"yes\".");
  check_error(client.Post("/detokenize", R"({"tokens": [99999]})", "application/json"), 400, "BadRequestError",
              "Token id 99999 is out of vocabulary");
  check_error(client.Post("/tokenize", R"({"prompt": 1})", "application/json"), 400, "BadRequestError",
              "prompt must be a string, got 1.");
  check_error(client.Post("/v1/completions", R"({"model": "other", "prompt": "x"})", "application/json"), 404,
              "NotFoundError", "The model `other` does not exist.");
  check_error(client.Post("/tokenize", R"({"model": "other", "prompt": "x"})", "application/json"), 404,
              "NotFoundError", "The model `other` does not exist.");

  // Still answering.
  auto health = client.Get("/health");
  REQUIRE(health);
  CHECK(health->status == 200);
}

TEST_CASE("unknown routes get 404 with an error object", "[serve][server]") {
  rlcore::Registry registry;
  RunningServer server(scripted_engine(registry));
  auto client = server.client();
  check_error(client.Get("/v1/chat/completions"), 404, "NotFoundError", "Not Found: GET /v1/chat/completions");
  check_error(client.Get("/v1/completions"), 404, "NotFoundError", "Not Found: GET /v1/completions");
  check_error(client.Post("/nowhere", "{}", "application/json"), 404, "NotFoundError", "Not Found: POST /nowhere");
}

TEST_CASE("bodies over the limit get 413 with an error object", "[serve][server]") {
  rlcore::Registry registry;
  RunningServer server(scripted_engine(registry), ServerOptions{"", 1024});
  auto client = server.client();
  const std::string big = json{{"prompt", std::string(2000, 'x')}}.dump();
  check_error(client.Post("/v1/completions", big, "application/json"), 413, "RequestTooLargeError",
              "Request body too large: the limit is 1024 bytes.");
  const json small = body_of(client.Post("/tokenize", R"({"prompt": "ok"})", "application/json"));
  CHECK(small["count"] == 2);
}

TEST_CASE("the default body limit is 4 MiB", "[serve][server]") {
  CHECK(ServerOptions{}.max_body_bytes == 4u * 1024 * 1024);
}

TEST_CASE("with an API key every route needs 'Authorization: Bearer KEY'", "[serve][server]") {
  rlcore::Registry registry;
  RunningServer server(scripted_engine(registry), ServerOptions{"s3cret"});

  for (const std::string key : {"", "wrong", "s3cret-longer", "s3cre"}) {
    INFO("key '" << key << "'");
    auto client = server.client(key);
    check_error(client.Get("/health"), 401, "AuthenticationError", "Unauthorized");
    check_error(client.Get("/v1/models"), 401, "AuthenticationError", "Unauthorized");
    check_error(client.Get("/version"), 401, "AuthenticationError", "Unauthorized");
    check_error(client.Post("/v1/completions", R"({"prompt": "x"})", "application/json"), 401, "AuthenticationError",
                "Unauthorized");
    check_error(client.Post("/tokenize", R"({"prompt": "x"})", "application/json"), 401, "AuthenticationError",
                "Unauthorized");
    check_error(client.Post("/detokenize", R"({"tokens": [1]})", "application/json"), 401, "AuthenticationError",
                "Unauthorized");
    check_error(client.Get("/nowhere"), 401, "AuthenticationError", "Unauthorized");
  }
  // Basic auth with the key as password is not a bearer token.
  auto basic = server.client();
  basic.set_basic_auth("user", "s3cret");
  check_error(basic.Get("/v1/models"), 401, "AuthenticationError", "Unauthorized");

  auto client = server.client("s3cret");
  auto health = client.Get("/health");
  REQUIRE(health);
  CHECK(health->status == 200);
  CHECK(body_of(client.Get("/v1/models"))["data"][0]["id"] == "tiny");
  CHECK(body_of(client.Get("/version"))["version"].is_string());
  CHECK(body_of(client.Post("/v1/completions", R"({"prompt": "x"})", "application/json"))["choices"].size() == 1);
  CHECK(body_of(client.Post("/tokenize", R"({"prompt": "x"})", "application/json"))["count"] == 1);
  CHECK(body_of(client.Post("/detokenize", R"({"tokens": [120]})", "application/json")).contains("prompt"));
  check_error(client.Get("/nowhere"), 404, "NotFoundError", "Not Found: GET /nowhere");
}

TEST_CASE("engine failures: ValueError is a 400, a full queue a 503, anything else a 500", "[serve][server]") {
  {
    RunningServer server(std::make_shared<FailingEngine<rlcore::ValueError>>());
    check_error(server.client().Post("/v1/completions", R"({"prompt": "x"})", "application/json"), 400,
                "BadRequestError", "engine says no");
  }
  {
    RunningServer server(std::make_shared<FailingEngine<rlcore::OverloadedError>>());
    check_error(server.client().Post("/v1/completions", R"({"prompt": "x"})", "application/json"), 503,
                "ServiceUnavailableError", "engine says no");
  }
  {
    RunningServer server(std::make_shared<FailingEngine<std::runtime_error>>());
    auto client = server.client();
    check_error(client.Post("/v1/completions", R"({"prompt": "x"})", "application/json"), 500, "InternalServerError",
                "engine says no");
    auto health = client.Get("/health");
    REQUIRE(health);
    CHECK(health->status == 200);
  }
}

TEST_CASE("concurrent clients are all answered correctly, one generate at a time", "[serve][server]") {
  rlcore::Registry registry;
  auto engine = scripted_engine(registry);
  RunningServer server(engine);
  constexpr int kClients = 8;
  constexpr int kRequestsEach = 4;
  std::vector<std::string> failures(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto client = server.client();
      for (int r = 0; r < kRequestsEach; ++r) {
        // Each request carries its own prompt and n, so a mixed-up answer shows.
        const std::vector<int32_t> prompt = {10 + c, 20 + r};
        const int n = 1 + (c + r) % 3;
        const json request = {{"prompt", prompt}, {"n", n}, {"max_tokens", 2}, {"return_token_ids", true}};
        auto result = client.Post("/v1/completions", request.dump(), "application/json");
        if (!result || result->status != 200) {
          failures[c] = "request failed";
          return;
        }
        const json response = json::parse(result->body);
        if (response["choices"].size() != static_cast<std::size_t>(n)) failures[c] = "wrong choice count";
        for (const auto& choice : response["choices"]) {
          if (choice["prompt_token_ids"] != prompt) failures[c] = "another request's prompt";
        }
      }
    });
  }
  for (auto& thread : clients) thread.join();
  for (int c = 0; c < kClients; ++c) {
    INFO("client " << c);
    CHECK(failures[c].empty());
  }
  CHECK(engine->calls() == kClients * kRequestsEach);
  CHECK_FALSE(engine->overlapped());
}

TEST_CASE("stop() ends serve() cleanly, also when it comes first", "[serve][server]") {
  rlcore::Registry registry;
  {
    RunningServer server(scripted_engine(registry));
    auto health = server.client().Get("/health");
    REQUIRE(health);
    server.stop_and_join();
    CHECK(server.served_cleanly());
    CHECK_FALSE(server.client().Get("/health"));  // nobody listening any more
  }
  auto api = std::make_shared<OpenAiApi>(scripted_engine(registry), rlcore_test::test_model());
  Server early(api);
  early.bind("127.0.0.1", 0);
  early.stop();
  CHECK(early.serve());
}

TEST_CASE("binding a port in use is an IoError naming the address", "[serve][server]") {
  rlcore::Registry registry;
  RunningServer server(scripted_engine(registry));
  auto api = std::make_shared<OpenAiApi>(scripted_engine(registry), rlcore_test::test_model());
  Server second(api);
  const std::string address = "127.0.0.1:" + std::to_string(server.port());
  CHECK(rlcore_test::error_of<rlcore::IoError>([&] { second.bind("127.0.0.1", server.port()); }) ==
        "rlcore serve: cannot listen on " + address + ": Address already in use");
}

TEST_CASE("bytes that are not UTF-8 in a prompt still get a JSON answer (found by fuzz_serve_requests)",
          "[serve][server]") {
  rlcore::Registry registry;
  OpenAiApi api(scripted_engine(registry), rlcore_test::test_model());
  const std::string prompt = "hello w\xffrld";
  for (const auto& answer : {api.tokenize(R"({"prompt": ")" + prompt + R"(", "return_token_strs": true})"),
                             api.completions(R"({"prompt": ")" + prompt + R"(", "max_tokens": 2, "echo": true})")}) {
    INFO(answer.body);
    CHECK((answer.status == 200 || answer.status == 400));
    REQUIRE(nlohmann::json::accept(answer.body));
  }
}
