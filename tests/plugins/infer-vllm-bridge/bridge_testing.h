// Shared by the bridge tests: a fake vLLM / SGLang server with the routes the
// bridge probes, a deterministic /v1/completions, and bridge options for it.
#pragma once

#include "../infer-native/engine_testing.h"
#include "fake_server.h"

#include "bridge_engine.h"
#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"

namespace bridge_test {

using nlohmann::json;

inline constexpr const char* kModel = "tiny";

// Sample j of prompt p: max_tokens tokens p.back() + 1 + j + k, log-prob -0.1 (k + 1).
inline void answer_completions(const httplib::Request& req, httplib::Response& res) {
  const json body = json::parse(req.body);
  json choices = json::array();
  int64_t index = 0;
  for (const json& prompt : body["prompt"]) {
    for (int64_t j = 0; j < body["n"].get<int64_t>(); ++j) {
      json ids = json::array();
      json logprobs = json::array();
      for (int64_t k = 0; k < body["max_tokens"].get<int64_t>(); ++k) {
        ids.push_back(prompt.back().get<int64_t>() + 1 + j + k);
        logprobs.push_back(-0.1 * static_cast<double>(k + 1));
      }
      choices.push_back({{"index", index++},
                         {"text", ""},
                         {"token_ids", ids},
                         {"logprobs", {{"token_logprobs", logprobs}, {"tokens", json::array()}}},
                         {"finish_reason", "length"}});
    }
  }
  res.set_content(json{{"object", "text_completion"}, {"choices", choices}}.dump(), "application/json");
}

// The read-only routes of a server; `kind` "vllm" adds dev mode's /is_sleeping,
// "sglang" /model_info (weight_version "default", as SGLang starts).
inline void add_probe_routes(FakeServer& server, const std::string& kind, int64_t max_model_len = 256) {
  server.on("GET", "/health", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  server.on_json(
      "GET", "/v1/models",
      {{"object", "list"}, {"data", {{{"id", kModel}, {"object", "model"}, {"max_model_len", max_model_len}}}}});
  server.on_json("GET", "/version", {{"version", kind == "vllm" ? "0.16.0" : "0.5.0"}});
  if (kind == "vllm") server.on_json("GET", "/is_sleeping", {{"is_sleeping", false}});
  if (kind == "sglang") {
    server.on_json("GET", "/model_info",
                   {{"model_path", "/m"}, {"is_generation", true}, {"weight_version", "default"}});
  }
  server.on("POST", "/v1/completions", answer_completions);
}

inline rlcore::infer_vllm_bridge::BridgeOptions options_for(const FakeServer& server) {
  rlcore::infer_vllm_bridge::BridgeOptions options;
  options.server_urls = {server.url()};
  options.retry_backoff_s = 0.01;
  options.request_timeout_s = 5;
  return options;
}

inline rlcore::ComponentContext context_for(const infer_native_test::Fixture& fixture) {
  rlcore::ComponentContext context;
  context.model_path = fixture.dir.str();
  return context;
}

// The fixture's weights as the sharding manager would hand them over.
inline rlcore::NamedTensorList weights_of(const infer_native_test::Fixture& fixture, float shift = 0) {
  rlcore::NamedTensorList weights;
  for (auto& [name, tensor] : rlcore::SafetensorsCheckpoint(fixture.dir.path()).load_all()) {
    weights.emplace_back(name, tensor + shift);
  }
  return weights;
}

}  // namespace bridge_test
