// `rlcore serve --dev-mode` over HTTP with an engine that records what it is
// asked: the routes exist only in dev mode, sleep / wake-up follow vLLM's tags
// and levels, pause holds or refuses completions, and a reload from disk
// checks the whole directory first, so a bad one leaves the old weights.
// (Reloads that change real outputs: tests/plugins/infer-vllm-bridge.)
#include "serve_testing.h"

#include <filesystem>
#include <future>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "rlcore/safetensors/safetensors.h"

using nlohmann::json;
using rlcore_test::RunningServer;
namespace fs = std::filesystem;

namespace {

// One 2x3 float parameter "w"; records sleeps, wake-ups and loaded values.
class RecordingEngine : public rlcore_test::ScriptedEngine {
 public:
  RecordingEngine() : ScriptedEngine({1}) {}
  std::vector<rlcore::WeightMeta> weight_meta() const override { return {{"w", {2, 3}, at::kFloat}}; }
  void load_weights(const rlcore::NamedTensorList& weights, int64_t version) override {
    std::lock_guard<std::mutex> lock(mutex_);
    loaded_ = weights.at(0).second.clone();
    version_ = version;
    events_.push_back("load " + std::to_string(version));
  }
  int64_t weight_version() const override { return version_; }
  void sleep() override { record("sleep"); }
  void wake_up() override { record("wake_up"); }

  std::vector<std::string> events() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }
  at::Tensor loaded() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return loaded_;
  }

 private:
  void record(const std::string& event) {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(event);
  }
  mutable std::mutex mutex_;
  std::vector<std::string> events_;
  at::Tensor loaded_;
  int64_t version_ = 0;
};

// A checkpoint directory holding `tensors`.
std::string checkpoint_with(const std::string& name, const rlcore::NamedTensors& tensors) {
  const fs::path dir = fs::temp_directory_path() / ("rlcore_dev_mode_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  rlcore::save_safetensors_checkpoint(dir, tensors, 1 << 30);
  return dir.string();
}

json post(const RunningServer& server, const std::string& path, const json& body, int expected) {
  const auto result = server.client().Post(path, body.is_null() ? "" : body.dump(), "application/json");
  REQUIRE(result);
  INFO(path << " -> " << result->body);
  CHECK(result->status == expected);
  return result->body.empty() ? json() : json::parse(result->body);
}

json get(const RunningServer& server, const std::string& path) {
  const auto result = server.client().Get(path);
  REQUIRE(result);
  REQUIRE(result->status == 200);
  return json::parse(result->body);
}

const json kCompletion = {{"prompt", {1, 2}}, {"max_tokens", 1}};

}  // namespace

TEST_CASE("the dev-mode routes exist only with --dev-mode", "[serve][dev_mode]") {
  RunningServer plain(std::make_shared<RecordingEngine>());
  for (const char* path : {"/sleep", "/collective_rpc", "/update_weights_from_disk", "/pause"}) {
    INFO(path);
    CHECK(plain.client().Post(path, "{}", "application/json")->status == 404);
  }
  CHECK(plain.client().Get("/is_sleeping")->status == 404);
  RunningServer dev(std::make_shared<RecordingEngine>(), {}, true);
  CHECK(get(dev, "/is_sleeping") == json{{"is_sleeping", false}});
}

TEST_CASE("sleep and wake up follow vLLM's levels and tags, SGLang's memory routes the same", "[serve][dev_mode]") {
  auto engine = std::make_shared<RecordingEngine>();
  const std::string start = checkpoint_with("start", {{"w", at::full({2, 3}, 1.0f)}});
  RunningServer server(engine, {}, true, start);

  CHECK(post(server, "/sleep?level=1", nullptr, 200) == json{{"status", "sleeping"}, {"level", 1}});
  CHECK(get(server, "/is_sleeping")["is_sleeping"] == true);
  CHECK(post(server, "/wake_up?tags=weights", nullptr, 200)["status"] == "sleeping");  // the KV cache still sleeps
  CHECK(post(server, "/wake_up?tags=kv_cache", nullptr, 200)["status"] == "awake");
  CHECK(get(server, "/is_sleeping")["is_sleeping"] == false);
  // Level 1 keeps the weights: waking them reloads what the engine had.
  CHECK(engine->events() == std::vector<std::string>{"sleep", "wake_up", "load 1"});
  CHECK(engine->loaded().equal(at::full({2, 3}, 1.0f)));

  post(server, "/sleep?level=2", nullptr, 200);
  post(server, "/wake_up", nullptr, 200);  // no tags: everything; level 2 dropped the weights
  CHECK(engine->events().size() == 5);
  CHECK(engine->events().back() == "wake_up");

  CHECK(post(server, "/release_memory_occupation", {{"tags", nullptr}}, 200).is_null());
  CHECK(get(server, "/is_sleeping")["is_sleeping"] == true);
  post(server, "/resume_memory_occupation", {{"tags", {"weights", "kv_cache"}}}, 200);
  CHECK(get(server, "/is_sleeping")["is_sleeping"] == false);

  CHECK(post(server, "/sleep?level=7", nullptr, 400)["message"].get<std::string>().find("level") != std::string::npos);
  CHECK(post(server, "/wake_up?tags=everything", nullptr, 400)["param"] == "tags");
  CHECK(post(server, "/resume_memory_occupation", {{"tags", "weights"}}, 400)["param"] == "tags");
}

TEST_CASE("a POST without a body or Content-Length is an empty body, as uvicorn reads it", "[serve][dev_mode]") {
  const std::string start = checkpoint_with("bare", {{"w", at::full({2, 3}, 1.0f)}});
  RunningServer server(std::make_shared<RecordingEngine>(), {}, true, start);
  // What `curl -X POST 'localhost:8000/sleep?level=1'` sends (vLLM's documentation).
  const auto bare = [&](const std::string& path) {
    return rlcore_test::raw_http(server.port(),
                                 "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  };
  CHECK_THAT(bare("/sleep?level=1"), Catch::StartsWith("HTTP/1.1 200") && Catch::Contains("sleeping"));
  CHECK(get(server, "/is_sleeping")["is_sleeping"] == true);
  CHECK_THAT(bare("/wake_up"), Catch::StartsWith("HTTP/1.1 200") && Catch::Contains("awake"));
  CHECK_THAT(bare("/pause?mode=wait"), Catch::StartsWith("HTTP/1.1 200"));
  CHECK_THAT(bare("/resume"), Catch::StartsWith("HTTP/1.1 200"));
  // A route that needs a body says what is wrong with the empty one.
  CHECK_THAT(bare("/v1/completions"), Catch::StartsWith("HTTP/1.1 400") && Catch::Contains("JSON"));
}

TEST_CASE("pause: keep holds new completions until resume, wait refuses them with 503", "[serve][dev_mode]") {
  RunningServer server(std::make_shared<RecordingEngine>(), {}, true);
  CHECK(post(server, "/pause?mode=keep", nullptr, 200) == json{{"status", "paused"}});
  CHECK(get(server, "/is_paused")["is_paused"] == true);
  auto held = std::async(std::launch::async, [&] {
    return server.client().Post("/v1/completions", kCompletion.dump(), "application/json")->status;
  });
  CHECK(held.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
  CHECK(post(server, "/resume", nullptr, 200) == json{{"status", "resumed"}});
  CHECK(held.get() == 200);

  post(server, "/pause?mode=wait", nullptr, 200);
  CHECK(post(server, "/v1/completions", kCompletion, 503)["type"] == "ServiceUnavailableError");
  post(server, "/resume", nullptr, 200);
  post(server, "/v1/completions", kCompletion, 200);
  CHECK(post(server, "/pause?mode=later", nullptr, 400)["param"] == "mode");
}

TEST_CASE("reloads check the whole directory first: a bad one answers an error and changes nothing",
          "[serve][dev_mode]") {
  auto engine = std::make_shared<RecordingEngine>();
  RunningServer server(engine, {}, true);
  const std::string good = checkpoint_with("good", {{"w", at::full({2, 3}, 2.0, at::kDouble)}});
  const json rpc = {{"method", "reload_weights"}, {"kwargs", {{"weights_path", good}, {"is_checkpoint_format", true}}}};
  CHECK(post(server, "/collective_rpc", rpc, 200) == json{{"results", {nullptr}}});
  CHECK(engine->loaded().scalar_type() == at::kFloat);  // converted to the engine's dtype
  CHECK(engine->loaded().equal(at::full({2, 3}, 2.0f)));

  const std::string misshapen = checkpoint_with("misshapen", {{"w", at::zeros({3, 2})}});
  const std::string extra = checkpoint_with("extra", {{"w", at::zeros({2, 3})}, {"v", at::zeros({1})}});
  const std::string missing = checkpoint_with("missing", {{"u", at::zeros({2, 3})}});
  const std::string truncated = checkpoint_with("truncated", {{"w", at::ones({2, 3})}});
  const fs::path truncated_file = fs::path(truncated) / "model.safetensors";
  fs::resize_file(truncated_file, fs::file_size(truncated_file) - 8);  // the last tensor's bytes cut short
  for (const auto& [dir, complaint] :
       std::vector<std::pair<std::string, std::string>>{{misshapen, "shape [3, 2]"},
                                                        {extra, "'v' is not a parameter"},
                                                        {missing, "no tensor 'w'"},
                                                        {truncated, "cannot read weights"},
                                                        {"/nonexistent/dir", "cannot read weights"},
                                                        {"relative/dir", "absolute path"}}) {
    INFO(dir);
    json bad = rpc;
    bad["kwargs"]["weights_path"] = dir;
    CHECK_THAT(post(server, "/collective_rpc", bad, 400)["message"].get<std::string>(), Catch::Contains(complaint));
    const json sglang = post(server, "/update_weights_from_disk", {{"model_path", dir}}, 400);
    CHECK(sglang["success"] == false);
    CHECK_THAT(sglang["message"].get<std::string>(), Catch::Contains(complaint));
  }
  CHECK(engine->loaded().equal(at::full({2, 3}, 2.0f)));  // still the good weights
  CHECK(engine->weight_version() == 1);

  CHECK(post(server, "/collective_rpc", {{"args", json::array()}}, 400)["message"] ==
        "Missing 'method' in request body");
  CHECK_THAT(post(server, "/collective_rpc", {{"method", "execute_model"}}, 400)["message"].get<std::string>(),
             Catch::Contains("only reload_weights"));
  CHECK(post(server, "/collective_rpc", json::array({1}), 400)["type"] == "BadRequestError");
  CHECK(post(server, "/update_weights_from_disk", {{"model_path", 5}}, 400)["success"] == false);
}

TEST_CASE("the weight version: set by SGLang's reload or vLLM's route, read from either", "[serve][dev_mode]") {
  auto engine = std::make_shared<RecordingEngine>();
  RunningServer server(engine, {}, true);
  CHECK(get(server, "/weight_info")["weight_version"] == "default");
  const std::string dir = checkpoint_with("versioned", {{"w", at::ones({2, 3})}});
  CHECK(post(server, "/update_weights_from_disk", {{"model_path", dir}, {"weight_version", "7"}}, 200) ==
        json{{"success", true}, {"message", "Succeeded to update model weights."}, {"num_paused_requests", 0}});
  CHECK(get(server, "/model_info")["weight_version"] == "7");
  CHECK(get(server, "/get_model_info")["model_path"] == dir);
  CHECK(post(server, "/update_weight_version", {{"new_version", "8"}}, 200)["new_version"] == "8");
  CHECK(get(server, "/weight_info")["weight_version"] == "8");
  CHECK(post(server, "/update_weight_version", {{"new_version", 8}}, 400)["param"] == "new_version");
}

TEST_CASE("pause with mode abort ends the generations in flight first, keep freezes them, wait lets them finish",
          "[serve][dev_mode]") {
  for (const char* mode : {"abort", "wait", "keep"}) {
    INFO(mode);
    rlcore::serve::GenerationGate gate;
    int aborts = 0;
    int freezes = 0;
    gate.pause(mode, {[&] { ++aborts; }, [&] { return ++freezes > 0; }});  // nothing in flight: returns at once
    CHECK(aborts == (std::string(mode) == "abort" ? 1 : 0));
    CHECK(freezes == (std::string(mode) == "keep" ? 1 : 0));
    CHECK(gate.paused());
    gate.resume();
  }
}

TEST_CASE("pause?mode=keep freezes a streamed completion mid-way; resume finishes it, its cache recomputed",
          "[serve][dev_mode]") {
  for (const char* clear_cache : {"false", "true"}) {
    INFO("clear_cache " << clear_cache);
    auto engine = std::make_shared<rlcore_test::ScriptedRequests>();
    engine->block_at_step(2);
    RunningServer server(engine, {}, true);
    auto completion = std::async(std::launch::async, [&] {
      auto response = server.client().Post(
          "/v1/completions", R"({"prompt": [30, 31], "max_tokens": 5, "ignore_eos": true})", "application/json");
      return response ? json::parse(response->body) : json();
    });
    REQUIRE(engine->wait_blocked());
    auto pausing = std::async(std::launch::async, [&] {
      return post(server, std::string("/pause?mode=keep&clear_cache=") + clear_cache, nullptr, 200);
    });
    // The pause has begun (it waits for the step in progress, which is held): release that step.
    for (int i = 0; i < 1000 && !get(server, "/is_paused")["is_paused"].get<bool>(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK(pausing.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);
    engine->release_step();
    CHECK(pausing.get() == json{{"status", "paused"}});  // without waiting for the completion
    const size_t steps = engine->token_steps();
    CHECK(completion.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
    CHECK(engine->token_steps() == steps);
    post(server, "/resume", nullptr, 200);
    const json answer = completion.get();
    REQUIRE(answer.contains("usage"));
    CHECK(answer["usage"]["completion_tokens"] == 5);
    CHECK(engine->resumed_sizes() ==
          (std::string(clear_cache) == "true" ? std::vector<size_t>{0, 2} : std::vector<size_t>{0}));
  }
  RunningServer server(std::make_shared<rlcore_test::ScriptedRequests>(), {}, true);
  CHECK(post(server, "/pause?mode=keep&clear_cache=maybe", nullptr, 400)["param"] == "clear_cache");
}

TEST_CASE("pause?mode=wait after keep lets the frozen completion finish instead of waiting forever",
          "[serve][dev_mode]") {
  auto engine = std::make_shared<rlcore_test::ScriptedRequests>();
  engine->block_at_step(2);
  RunningServer server(engine, {}, true);
  auto completion = std::async(std::launch::async, [&] {
    auto response = server.client().Post("/v1/completions", R"({"prompt": [50], "max_tokens": 4, "ignore_eos": true})",
                                         "application/json");
    return response ? response->status : 0;
  });
  REQUIRE(engine->wait_blocked());
  auto keep = std::async(std::launch::async, [&] { return post(server, "/pause?mode=keep", nullptr, 200); });
  for (int i = 0; i < 1000 && !get(server, "/is_paused")["is_paused"].get<bool>(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  engine->release_step();
  CHECK(keep.get() == json{{"status", "paused"}});
  CHECK(completion.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);  // frozen
  CHECK(post(server, "/pause?mode=wait", nullptr, 200) == json{{"status", "paused"}});        // returns: it finished
  CHECK(completion.get() == 200);
  post(server, "/resume", nullptr, 200);
}

TEST_CASE("SGLang's /abort_request ends a completion by its id, or all of them", "[serve][dev_mode]") {
  auto engine = std::make_shared<rlcore_test::ScriptedRequests>(0, /*stall_after_first_token=*/true);
  RunningServer server(engine, {}, true);
  // A streamed completion that would run for long: its first chunk names it.
  std::string first_id;
  std::mutex mutex;
  std::condition_variable named;
  std::string stream;
  std::thread client([&] {
    httplib::Request request;
    request.method = "POST";
    request.path = "/v1/completions";
    request.body = R"({"prompt": [5, 6], "max_tokens": 50, "stream": true, "ignore_eos": true})";
    request.set_header("Content-Type", "application/json");
    request.content_receiver = [&](const char* data, std::size_t size, uint64_t, uint64_t) {
      std::lock_guard<std::mutex> lock(mutex);
      stream.append(data, size);
      const std::size_t at = stream.find("\"id\":\"");
      if (first_id.empty() && at != std::string::npos) {
        first_id = stream.substr(at + 6, stream.find('"', at + 6) - at - 6);
        named.notify_all();
      }
      return true;
    };
    server.client().send(request);
  });
  bool started = false;
  {
    std::unique_lock<std::mutex> lock(mutex);
    started = named.wait_for(lock, std::chrono::seconds(30), [&] { return !first_id.empty(); });
  }
  if (!started) {  // end the request so the client thread can be joined, then fail
    post(server, "/abort_request", {{"abort_all", true}}, 200);
    client.join();
    FAIL("no streamed chunk named the completion within 30 s: " << stream);
  }
  CHECK_THAT(first_id, Catch::StartsWith("cmpl-"));
  CHECK(post(server, "/abort_request", {{"rid", "cmpl-not-this-one"}}, 200).is_null());
  CHECK(engine->load().running == 1);
  CHECK(post(server, "/abort_request", {{"rid", first_id}}, 200).is_null());
  client.join();
  CHECK(engine->load().running == 0);
  CHECK_THAT(stream, Catch::EndsWith("data: [DONE]\n\n"));
  CHECK(post(server, "/abort_request", {{"rid", 5}}, 400)["param"] == "rid");
  CHECK(post(server, "/abort_request", {{"abort_all", "yes"}}, 400)["param"] == "abort_all");
  CHECK(post(server, "/abort_request", {{"abort_all", true}}, 200).is_null());
}
