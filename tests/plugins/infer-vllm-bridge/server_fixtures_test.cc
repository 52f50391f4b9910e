// The bodies real servers send, recorded from their sources into
// tests/fixtures/vllm_bridge/ (see its README), through the bridge's readers:
// completions of vLLM and SGLang, /v1/models, and each server's error shapes.
#include "bridge_testing.h"

#include <fstream>

#include "completion_protocol.h"
#include "../../common/test_paths.h"

using nlohmann::json;

namespace {

json fixture(const std::string& name) {
  const std::string path = rlcore_test::source_dir() + "/tests/fixtures/vllm_bridge/" + name;
  std::ifstream in(path);
  REQUIRE(in.good());
  return json::parse(in);
}

}  // namespace

TEST_CASE("vLLM's and SGLang's completion bodies read the same", "[vllm_bridge]") {
  const std::string server = GENERATE(std::string("vllm-0.33.0"), std::string("sglang-0.5.23"));
  INFO(server);
  const json request = fixture(server + "/v1_completions.request.json");
  const json response = fixture(server + "/v1_completions.response.json");
  const std::size_t prompts = request["prompt"].size();
  const int64_t n = request["n"].get<int64_t>();
  const rlcore::GenerationOutput out = rlcore::infer_vllm_bridge::parse_completion_response(response, prompts, n);
  REQUIRE(out.token_ids.size() == prompts * static_cast<std::size_t>(n));
  for (const json& choice : response["choices"]) {
    const auto index = choice["index"].get<std::size_t>();
    CHECK(out.token_ids[index] == choice["token_ids"].get<std::vector<int32_t>>());
    CHECK(out.logprobs[index] == choice["logprobs"]["token_logprobs"].get<std::vector<float>>());
    CHECK(rlcore::finish_reason_name(out.finish_reasons[index]) == choice["finish_reason"].get<std::string>());
  }
  // What the bridge sends is what the server's request model reads.
  rlcore::SamplingParams sampling;
  sampling.n = n;
  const json sent = rlcore::infer_vllm_bridge::completion_request("m", request["prompt"], sampling, 1);
  for (const auto& [key, value] : sent.items()) {
    INFO(key);
    CHECK(request.contains(key));
  }
}

TEST_CASE("vLLM's token_id strings stand in for missing token_ids", "[vllm_bridge]") {
  json response = fixture("vllm-0.33.0/v1_completions.response.json");
  json expected = json::array();
  for (json& choice : response["choices"]) {
    expected.push_back(choice["token_ids"]);
    choice.erase("token_ids");
  }
  const rlcore::GenerationOutput out = rlcore::infer_vllm_bridge::parse_completion_response(response, 2, 2);
  for (std::size_t i = 0; i < out.token_ids.size(); ++i)
    CHECK(out.token_ids[i] == expected[i].get<std::vector<int32_t>>());
}

TEST_CASE("every server's error shape is quoted by its message", "[vllm_bridge]") {
  using rlcore::http::server_message;
  CHECK(server_message(fixture("vllm-0.33.0/v1_completions.error.json").dump()) ==
        fixture("vllm-0.33.0/v1_completions.error.json")["error"]["message"]);
  CHECK(server_message(fixture("vllm-0.33.0/pause.error.json").dump()) ==
        fixture("vllm-0.33.0/pause.error.json")["error"]);
  CHECK(server_message(fixture("sglang-0.5.23/v1_completions.error.json").dump()) ==
        fixture("sglang-0.5.23/v1_completions.error.json")["message"]);
  CHECK(server_message(fixture("sglang-0.5.23/update_weights_from_disk.error.json").dump()) ==
        fixture("sglang-0.5.23/update_weights_from_disk.error.json")["message"]);
  CHECK(server_message("") == "(empty body)");
  CHECK(server_message(std::string(5000, 'x')).size() < 600);
}

TEST_CASE("the bridge probes a server that answers with the recorded bodies", "[vllm_bridge]") {
  const infer_native_test::Fixture checkpoint;
  bridge_test::FakeServer server;
  server.on("GET", "/health", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  server.on_json("GET", "/v1/models", fixture("vllm-0.33.0/v1_models.response.json"));
  server.on_json("GET", "/version", fixture("vllm-0.33.0/version.response.json"));
  server.on_json("GET", "/is_sleeping", fixture("vllm-0.33.0/is_sleeping.response.json"));
  rlcore::infer_vllm_bridge::BridgeOptions options = bridge_test::options_for(server);
  options.served_model_name = "Qwen/Qwen2.5-0.5B-Instruct";
  options.max_model_len = 4096;
  const rlcore::infer_vllm_bridge::BridgeEngine engine(options, bridge_test::context_for(checkpoint));
  CHECK(engine.server().version == "0.33.0");
  CHECK(engine.server().max_model_len == 32768);
  CHECK(engine.server().kind == rlcore::infer_vllm_bridge::ServerKind::kVllm);

  bridge_test::FakeServer sglang;
  sglang.on("GET", "/health", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  sglang.on_json("GET", "/v1/models", fixture("sglang-0.5.23/v1_models.response.json"));
  sglang.on_json("GET", "/model_info", fixture("sglang-0.5.23/model_info.response.json"));
  options = bridge_test::options_for(sglang);
  const rlcore::infer_vllm_bridge::BridgeEngine sglang_engine(options, bridge_test::context_for(checkpoint));
  CHECK(sglang_engine.server().kind == rlcore::infer_vllm_bridge::ServerKind::kSglang);
  CHECK(sglang_engine.server().version == "unknown");  // SGLang has no /version
}
