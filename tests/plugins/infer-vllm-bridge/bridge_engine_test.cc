// The bridge against scripted servers: the checks before the first step,
// requests and their answers, every way a server can fail, and the weight
// reload and sleep/wake sequences of vLLM and SGLang.
#include "bridge_testing.h"

#include <filesystem>

using namespace bridge_test;
using infer_native_test::Fixture;
using rlcore::infer_vllm_bridge::BridgeEngine;

namespace {

rlcore::SamplingParams sampling(int64_t n, int64_t max_tokens, int64_t seed = -1) {
  rlcore::SamplingParams s;
  s.n = n;
  s.max_tokens = max_tokens;
  s.seed = seed;
  s.temperature = 0.7;
  return s;
}

std::string bridge_error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("the bridge checks the server before the first step", "[vllm_bridge]") {
  const Fixture fixture;
  FakeServer server;
  add_probe_routes(server, "vllm", 256);
  auto options = options_for(server);

  SECTION("a server that speaks vLLM's dev mode is driven as vLLM") {
    BridgeEngine engine(options, context_for(fixture));
    CHECK(engine.server().kind == rlcore::infer_vllm_bridge::ServerKind::kVllm);
    CHECK(engine.server().model == kModel);
    CHECK(engine.server().version == "0.16.0");
    CHECK(engine.server().max_model_len == 256);
    CHECK(engine.weight_meta().size() == rlcore::SafetensorsCheckpoint(fixture.dir.path()).names().size());
  }
  SECTION("SGLang's routes make it SGLang") {
    server.remove("GET", "/is_sleeping");
    server.on_json("GET", "/get_model_info", {{"model_path", "/m"}, {"is_generation", true}});  // the older name
    BridgeEngine engine(options, context_for(fixture));
    CHECK(engine.server().kind == rlcore::infer_vllm_bridge::ServerKind::kSglang);
  }
  SECTION("a server that cannot reload weights is refused, saying how to start vLLM") {
    server.remove("GET", "/is_sleeping");
    const std::string error = bridge_error_of([&] { BridgeEngine(options, context_for(fixture)); });
    CHECK_THAT(error, Catch::Contains("VLLM_SERVER_DEV_MODE=1") && Catch::Contains(server.url()));
  }
  SECTION("a model the server does not serve is named with the ones it does") {
    options.served_model_name = "llama-70b";
    const std::string error = bridge_error_of([&] { BridgeEngine(options, context_for(fixture)); });
    CHECK_THAT(error, Catch::Contains("'llama-70b' is not served") && Catch::Contains("'tiny'"));
  }
  SECTION("a max_model_len beyond the server's is refused") {
    options.max_model_len = 1024;
    CHECK_THAT(bridge_error_of([&] { BridgeEngine(options, context_for(fixture)); }),
               Catch::Contains("max_model_len 1024") && Catch::Contains("256"));
  }
  SECTION("the api_key goes to every request as a Bearer token") {
    server.on("GET", "/health", [](const httplib::Request& req, httplib::Response& res) {
      res.status = req.get_header_value("Authorization") == "Bearer s3cret" ? 200 : 401;
    });
    CHECK_THAT(bridge_error_of([&] { BridgeEngine(options, context_for(fixture)); }), Catch::Contains("HTTP 401"));
    options.api_key = "s3cret";
    CHECK_NOTHROW(BridgeEngine(options, context_for(fixture)));
  }
  SECTION("an unhealthy server is named with its answer") {
    server.on_json("GET", "/health", {{"error", {{"message", "engine dead"}}}}, 503);
    options.max_retries = 1;
    CHECK_THAT(bridge_error_of([&] { BridgeEngine(options, context_for(fixture)); }),
               Catch::Contains("/health") && Catch::Contains("engine dead"));
  }
}

TEST_CASE("a server that is down is an error naming the URL, after the retries", "[vllm_bridge]") {
  const Fixture fixture;
  std::string url;
  {
    FakeServer gone;
    url = gone.url();
  }
  rlcore::infer_vllm_bridge::BridgeOptions options;
  options.server_urls = {url};
  options.max_retries = 2;
  options.retry_backoff_s = 0.01;
  const std::string error = bridge_error_of([&] { BridgeEngine(options, context_for(fixture)); });
  CHECK_THAT(error, Catch::Contains(url + "/health") && Catch::Contains("after 3 attempts"));
  options.server_urls = {"localhost:8000"};
  CHECK_THAT(bridge_error_of([&] { BridgeEngine(options, context_for(fixture)); }), Catch::Contains("http://"));
}

TEST_CASE("generation is split into requests and comes back prompt-major", "[vllm_bridge]") {
  const Fixture fixture;
  FakeServer server;
  add_probe_routes(server, "vllm");
  auto options = options_for(server);
  options.prompts_per_request = 2;
  options.max_concurrent_requests = 2;
  BridgeEngine engine(options, context_for(fixture));
  server.clear_log();
  const std::vector<std::vector<int32_t>> prompts = {{10}, {20}, {30}, {40}, {50}};
  const rlcore::GenerationOutput out = engine.generate(prompts, sampling(2, 3, /*seed=*/7));
  REQUIRE(out.token_ids.size() == 10);
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    for (int32_t j = 0; j < 2; ++j) {
      INFO("prompt " << p << " sample " << j);
      const int32_t first = prompts[p][0] + 1 + j;
      CHECK(out.token_ids[p * 2 + j] == std::vector<int32_t>{first, first + 1, first + 2});
      CHECK(out.logprobs[p * 2 + j][2] == Approx(-0.3));
      CHECK(out.finish_reasons[p * 2 + j] == rlcore::FinishReason::kLength);
    }
  }
  std::vector<json> requests;
  for (const Recorded& r : server.log()) {
    if (r.target == "/v1/completions") requests.push_back(json::parse(r.body));
  }
  REQUIRE(requests.size() == 3);
  std::set<int64_t> seeds;
  for (const json& request : requests) {
    CHECK(request["model"] == kModel);
    CHECK(request["n"] == 2);
    CHECK(request["max_tokens"] == 3);
    CHECK(request["logprobs"] == 0);
    CHECK(request["return_token_ids"] == true);
    CHECK(request["return_tokens_as_token_ids"] == true);
    CHECK_FALSE(request.contains("top_k"));  // -1: left to the server's "disabled"
    seeds.insert(request["seed"].get<int64_t>());
  }
  CHECK(seeds == std::set<int64_t>{7, 8, 9});  // seed + request index: reproducible whatever the split
}

TEST_CASE("every way a generation request fails is a named error", "[vllm_bridge]") {
  const Fixture fixture;
  FakeServer server;
  add_probe_routes(server, "vllm");
  auto options = options_for(server);
  options.max_retries = 2;
  BridgeEngine engine(options, context_for(fixture));
  const std::vector<std::vector<int32_t>> prompts = {{1, 2}};

  SECTION("an HTTP error quotes the server's error object") {
    server.on_json("POST", "/v1/completions",
                   {{"error",
                     {{"message", "This model's maximum context length is 256 tokens"},
                      {"type", "BadRequestError"},
                      {"param", nullptr},
                      {"code", 400}}}},
                   400);
    CHECK_THAT(bridge_error_of([&] { engine.generate(prompts, sampling(1, 4)); }),
               Catch::Contains("HTTP 400") && Catch::Contains("maximum context length is 256"));
  }
  SECTION("a body that is not JSON, or JSON of the wrong shape, is a format error") {
    server.on("POST", "/v1/completions", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("<html>gateway</html>", "text/html");
    });
    CHECK_THROWS_AS(engine.generate(prompts, sampling(1, 4)), rlcore::FormatError);
    server.on_json("POST", "/v1/completions", {{"choices", {{{"index", 0}, {"token_ids", {1, "x"}}}}}});
    CHECK_THAT(bridge_error_of([&] { engine.generate(prompts, sampling(1, 2)); }), Catch::Contains("choices[0]"));
  }
  SECTION("a 503 is retried and the retry's answer is used") {
    int calls = 0;
    server.on("POST", "/v1/completions", [&](const httplib::Request& req, httplib::Response& res) {
      if (++calls < 3) {
        res.status = 503;
        res.set_content(R"({"error":{"message":"overloaded"}})", "application/json");
        return;
      }
      answer_completions(req, res);
    });
    CHECK(engine.generate(prompts, sampling(1, 2)).token_ids.at(0) == std::vector<int32_t>{3, 4});
    CHECK(calls == 3);
  }
  SECTION("a server slower than request_timeout_s times out, naming the route") {
    rlcore::infer_vllm_bridge::BridgeOptions slow = options;
    slow.request_timeout_s = 0.2;
    slow.max_retries = 0;
    BridgeEngine impatient(slow, context_for(fixture));
    server.on("POST", "/v1/completions", [](const httplib::Request& req, httplib::Response& res) {
      std::this_thread::sleep_for(std::chrono::milliseconds(800));
      answer_completions(req, res);
    });
    CHECK_THAT(bridge_error_of([&] { impatient.generate(prompts, sampling(1, 2)); }),
               Catch::Contains("/v1/completions"));
  }
}

TEST_CASE("vLLM: weights reload through pause, collective_rpc, reset, resume; a failure restores the last good",
          "[vllm_bridge]") {
  const Fixture fixture;
  FakeServer server;
  add_probe_routes(server, "vllm");
  for (const char* path : {"/pause", "/resume", "/reset_prefix_cache"}) server.on_json("POST", path, nullptr);
  server.on_json("POST", "/collective_rpc", {{"results", {nullptr}}});
  auto options = options_for(server);
  BridgeEngine engine(options, context_for(fixture));
  server.clear_log();

  const rlcore::NamedTensorList weights = weights_of(fixture, 0.5f);
  engine.load_weights(weights, 1);
  CHECK(engine.weight_version() == 1);
  CHECK(server.calls() == std::vector<std::string>{"POST /pause?mode=wait", "POST /collective_rpc",
                                                   "POST /reset_prefix_cache", "POST /update_weight_version",
                                                   "POST /resume"});
  const json rpc = json::parse(server.log()[1].body);
  CHECK(rpc["method"] == "reload_weights");
  CHECK(rpc["kwargs"]["is_checkpoint_format"] == true);
  const std::filesystem::path dir = rpc["kwargs"]["weights_path"].get<std::string>();
  CHECK(dir.is_absolute());
  CHECK(std::filesystem::exists(dir / "config.json"));
  const rlcore::SafetensorsCheckpoint written(dir);
  for (const auto& [name, tensor] : weights) CHECK(written.load(name).equal(tensor));
  CHECK(engine.generate({{5}}, sampling(1, 1)).weight_version == 1);

  // The next reload fails: the server gets version 1 back, resumes, and the error says so.
  server.clear_log();
  int rpcs = 0;
  server.on("POST", "/collective_rpc", [&](const httplib::Request&, httplib::Response& res) {
    if (++rpcs == 1) {
      res.status = 500;
      res.set_content(R"({"error":{"message":"KeyError: model.layers.0.mlp"}})", "application/json");
    } else {
      res.set_content(R"({"results":[null]})", "application/json");
    }
  });
  const std::string error = bridge_error_of([&] { engine.load_weights(weights_of(fixture, 1.0f), 2); });
  CHECK_THAT(error, Catch::Contains("KeyError: model.layers.0.mlp") && Catch::Contains("given back version 1"));
  CHECK(engine.weight_version() == 1);
  const std::vector<std::string> calls = server.calls();
  CHECK(std::count(calls.begin(), calls.end(), "POST /resume") == 2);
  CHECK(calls.back() == "POST /resume");
  CHECK(json::parse(server.log()[4].body)["kwargs"]["weights_path"] == dir.string());  // the restore
  CHECK(std::filesystem::exists(dir));
}

TEST_CASE("SGLang: weights reload with their version, and a server on other weights is an error", "[vllm_bridge]") {
  const Fixture fixture;
  FakeServer server;
  add_probe_routes(server, "sglang");
  std::string served_version = "0";
  server.on("POST", "/update_weights_from_disk", [&](const httplib::Request& req, httplib::Response& res) {
    const json body = json::parse(req.body);
    if (!std::filesystem::exists(std::filesystem::path(body["model_path"].get<std::string>()) / "model.safetensors")) {
      res.status = 400;
      res.set_content(R"({"success":false,"message":"no weights","num_paused_requests":0})", "application/json");
      return;
    }
    served_version = body["weight_version"].get<std::string>();
    res.set_content(R"({"success":true,"message":"Succeeded to update model weights.","num_paused_requests":0})",
                    "application/json");
  });
  server.on("GET", "/model_info", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"model_path", "/m"}, {"weight_version", served_version}}.dump(), "application/json");
  });
  BridgeEngine engine(options_for(server), context_for(fixture));
  engine.load_weights(weights_of(fixture), 3);
  CHECK(served_version == "3");
  CHECK(engine.generate({{5}}, sampling(1, 2)).weight_version == 3);

  served_version = "9";  // someone else reloaded the server
  CHECK_THAT(bridge_error_of([&] { engine.generate({{5}}, sampling(1, 2)); }),
             Catch::Contains("version '9'") && Catch::Contains("loaded version 3"));

  server.on_json("POST", "/update_weights_from_disk",
                 {{"success", false}, {"message", "Failed to get weights iterator"}, {"num_paused_requests", 0}}, 400);
  CHECK_THAT(bridge_error_of([&] { engine.load_weights(weights_of(fixture), 4); }),
             Catch::Contains("Failed to get weights iterator"));
  CHECK(engine.weight_version() == 3);
}

TEST_CASE("colocated: sleep, then weights, reload, KV cache; a separate server is left alone", "[vllm_bridge]") {
  const Fixture fixture;
  FakeServer server;
  add_probe_routes(server, "vllm");
  for (const char* path : {"/pause", "/resume", "/reset_prefix_cache", "/sleep", "/wake_up"}) {
    server.on_json("POST", path, nullptr);
  }
  server.on_json("POST", "/collective_rpc", {{"results", {nullptr}}});
  auto options = options_for(server);

  SECTION("free_cache_engine") {
    options.free_cache_engine = true;
    options.sleep_level = 2;
    BridgeEngine engine(options, context_for(fixture));
    server.clear_log();
    engine.sleep();
    CHECK_THROWS_AS(engine.generate({{5}}, sampling(1, 1)), rlcore::ValueError);
    engine.wake_up();
    engine.load_weights(weights_of(fixture), 1);
    engine.generate({{5}}, sampling(1, 1));
    CHECK(server.calls() ==
          std::vector<std::string>{"POST /sleep?level=2", "POST /wake_up?tags=weights", "POST /pause?mode=wait",
                                   "POST /collective_rpc", "POST /reset_prefix_cache", "POST /update_weight_version",
                                   "POST /resume", "POST /wake_up?tags=kv_cache", "POST /v1/completions"});
  }
  SECTION("without it") {
    BridgeEngine engine(options, context_for(fixture));
    server.clear_log();
    engine.sleep();
    engine.wake_up();
    CHECK(server.calls().empty());
  }
}

TEST_CASE("several servers: requests go round them, and every one reloads, sleeps and wakes", "[vllm_bridge]") {
  const Fixture fixture;
  FakeServer first;
  FakeServer second;
  for (FakeServer* server : {&first, &second}) {
    add_probe_routes(*server, "vllm");
    for (const char* path : {"/pause", "/resume", "/reset_prefix_cache", "/sleep", "/wake_up"}) {
      server->on_json("POST", path, nullptr);
    }
    server->on_json("POST", "/collective_rpc", {{"results", {nullptr}}});
  }
  auto options = options_for(first);
  options.server_urls.push_back(second.url());
  options.prompts_per_request = 1;
  options.free_cache_engine = true;

  SECTION("replicas of one model") {
    BridgeEngine engine(options, context_for(fixture));
    CHECK(engine.server_count() == 2);
    first.clear_log();
    second.clear_log();
    const rlcore::GenerationOutput out = engine.generate({{10}, {20}, {30}, {40}, {50}}, sampling(1, 1));
    REQUIRE(out.token_ids.size() == 5);
    for (int32_t p = 0; p < 5; ++p) CHECK(out.token_ids[p] == std::vector<int32_t>{10 * (p + 1) + 1});
    const auto completions = [](const FakeServer& server) {
      std::vector<int64_t> prompts;
      for (const Recorded& r : server.log()) {
        if (r.target == "/v1/completions") prompts.push_back(json::parse(r.body)["prompt"][0][0].get<int64_t>());
      }
      std::sort(prompts.begin(), prompts.end());
      return prompts;
    };
    CHECK(completions(first) == std::vector<int64_t>{10, 30, 50});  // requests 0, 2, 4
    CHECK(completions(second) == std::vector<int64_t>{20, 40});

    first.clear_log();
    second.clear_log();
    engine.sleep();
    engine.wake_up();
    engine.load_weights(weights_of(fixture, 0.5f), 1);
    const std::vector<std::string> expected = {
        "POST /sleep?level=1",  "POST /wake_up?tags=weights", "POST /pause?mode=wait",
        "POST /collective_rpc", "POST /reset_prefix_cache",   "POST /update_weight_version",
        "POST /resume",         "POST /wake_up?tags=kv_cache"};
    CHECK(first.calls() == expected);
    CHECK(second.calls() == expected);
    // One snapshot for both.
    CHECK(json::parse(first.log()[3].body)["kwargs"]["weights_path"] ==
          json::parse(second.log()[3].body)["kwargs"]["weights_path"]);

    // A reload that fails on one server gives every server the last good weights back.
    first.clear_log();
    second.clear_log();
    int rpcs = 0;
    second.on("POST", "/collective_rpc", [&](const httplib::Request&, httplib::Response& res) {
      if (++rpcs == 1) {
        res.status = 500;
        res.set_content(R"({"error":{"message":"out of memory"}})", "application/json");
      } else {
        res.set_content(R"({"results":[null]})", "application/json");
      }
    });
    const std::string error = bridge_error_of([&] { engine.load_weights(weights_of(fixture, 1.0f), 2); });
    CHECK_THAT(error, Catch::Contains(second.url()) && Catch::Contains("out of memory") &&
                          Catch::Contains("every server was given back version 1"));
    CHECK(engine.weight_version() == 1);
    for (FakeServer* server : {&first, &second}) {
      const std::vector<std::string> calls = server->calls();
      CHECK(std::count(calls.begin(), calls.end(), "POST /collective_rpc") == 2);  // the new weights, then the old
    }
  }
  SECTION("a server listed twice is refused") {
    options.server_urls.push_back(first.url());
    CHECK_THAT(bridge_error_of([&] { BridgeEngine(options, context_for(fixture)); }),
               Catch::Contains(first.url() + " more than once"));
  }
  SECTION("servers of different models are refused, naming both") {
    second.on_json("GET", "/v1/models",
                   {{"object", "list"}, {"data", {{{"id", "other"}, {"object", "model"}, {"max_model_len", 256}}}}});
    CHECK_THAT(bridge_error_of([&] { BridgeEngine(options, context_for(fixture)); }),
               Catch::Contains(first.url()) && Catch::Contains(second.url()) && Catch::Contains("'other'"));
  }
}
