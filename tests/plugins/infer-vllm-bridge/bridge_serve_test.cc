// The bridge against a real server: `rlcore serve --dev-mode` in its own
// process, next to infer-native in this one. Generation through HTTP equals
// in-process generation, weights reloaded from disk (vLLM's and SGLang's
// routes) give exactly what the new weights give, and sleep/wake round-trips.
#include "bridge_testing.h"

#include <cstdlib>
#include <filesystem>

#include "../../common/server_process.h"
#include "native_engine.h"
#include "../../common/test_paths.h"

using namespace bridge_test;
using rlcore::infer_vllm_bridge::BridgeEngine;
using rlcore_test::ServerProcess;
namespace fs = std::filesystem;

namespace {

const std::string kRlcore = rlcore_test::rlcore_executable();

// A tiny qwen2 with its tokenizer, as `rlcore model init` writes it.
struct Checkpoint {
  Checkpoint() {
    const std::string command =
        kRlcore + " model init --arch qwen2 --size tiny --seed 3 --force --out '" + dir.str() + "' > /dev/null 2>&1";
    REQUIRE(std::system(command.c_str()) == 0);
  }
  infer_native_test::TempDir dir;
};

ServerProcess serve(const Checkpoint& checkpoint) {
  return ServerProcess(kRlcore, {"--model", checkpoint.dir.str(), "--port", "0", "--dev-mode", "--served-model-name",
                                 kModel, "--plugins", rlcore_test::plugin_build_dir(), "--log-level", "warn"});
}

rlcore::ComponentContext context_of(const Checkpoint& checkpoint) {
  rlcore::ComponentContext context;
  context.model_path = checkpoint.dir.str();
  return context;
}

rlcore::infer_vllm_bridge::BridgeOptions bridge_options(const ServerProcess& server, const std::string& kind) {
  rlcore::infer_vllm_bridge::BridgeOptions options;
  options.server_urls = {server.url()};
  options.server_kind = kind;
  options.prompts_per_request = 2;  // several concurrent requests per call
  return options;
}

rlcore::SamplingParams greedy(int64_t tokens) {
  rlcore::SamplingParams s;
  s.temperature = 0;
  s.max_tokens = tokens;
  return s;
}

const std::vector<std::vector<int32_t>> kPrompts = {{5, 17, 42}, {100, 7, 250, 33, 9}, {12, 220, 13}, {3}, {77, 78}};

void check_same(const rlcore::GenerationOutput& actual, const rlcore::GenerationOutput& expected) {
  REQUIRE(actual.token_ids.size() == expected.token_ids.size());
  for (std::size_t i = 0; i < expected.token_ids.size(); ++i) {
    INFO("sequence " << i);
    CHECK(actual.token_ids[i] == expected.token_ids[i]);
    CHECK(infer_native_test::max_abs_diff(actual.logprobs[i], expected.logprobs[i]) < 1e-5);
  }
}

rlcore::NamedTensorList shifted_weights(const Checkpoint& checkpoint, double scale) {
  rlcore::NamedTensorList weights;
  for (auto& [name, tensor] : rlcore::SafetensorsCheckpoint(checkpoint.dir.path()).load_all()) {
    weights.emplace_back(name, tensor * scale + 0.01);
  }
  return weights;
}

}  // namespace

TEST_CASE("generation through rlcore serve equals infer-native in process", "[vllm_bridge][serve]") {
  const Checkpoint checkpoint;
  ServerProcess server = serve(checkpoint);
  BridgeEngine bridge(bridge_options(server, "auto"), context_of(checkpoint));
  CHECK(bridge.server().kind == rlcore::infer_vllm_bridge::ServerKind::kVllm);
  rlcore::infer_native::NativeEngine native({}, context_of(checkpoint));
  check_same(bridge.generate(kPrompts, greedy(8)), native.generate(kPrompts, greedy(8)));

  rlcore::SamplingParams sampled;
  sampled.n = 3;
  sampled.max_tokens = 6;
  sampled.temperature = 0.9;
  sampled.seed = 21;
  const auto first = bridge.generate(kPrompts, sampled);
  const auto again = bridge.generate(kPrompts, sampled);
  CHECK(first.token_ids == again.token_ids);
  sampled.seed = 22;
  CHECK(bridge.generate(kPrompts, sampled).token_ids != first.token_ids);
}

TEST_CASE("weights reloaded from disk give exactly what the new weights give", "[vllm_bridge][serve]") {
  const Checkpoint checkpoint;
  ServerProcess server = serve(checkpoint);
  const std::string kind = GENERATE(std::string("vllm"), std::string("sglang"));
  INFO("server_kind " << kind);
  BridgeEngine bridge(bridge_options(server, kind), context_of(checkpoint));
  rlcore::infer_native::NativeEngine native({}, context_of(checkpoint));
  const auto before = native.generate(kPrompts, greedy(8));

  const rlcore::NamedTensorList weights = shifted_weights(checkpoint, -1.5);
  bridge.load_weights(weights, 1);
  native.load_weights(weights, 1);
  const auto after = native.generate(kPrompts, greedy(8));
  REQUIRE(after.token_ids != before.token_ids);  // the new weights do change the answers
  const auto through_bridge = bridge.generate(kPrompts, greedy(8));
  check_same(through_bridge, after);
  CHECK(through_bridge.weight_version == 1);

  // A snapshot the server cannot load (a tensor of the wrong shape): an error, and the
  // server keeps answering with version 1.
  rlcore::NamedTensorList broken = weights;
  broken.front().second = at::zeros({3});
  CHECK_THROWS_AS(bridge.load_weights(broken, 2), rlcore::IoError);
  CHECK(bridge.weight_version() == 1);
  check_same(bridge.generate(kPrompts, greedy(8)), after);
}

TEST_CASE("a colocated server sleeps while the trainer trains and wakes for the next weights", "[vllm_bridge][serve]") {
  const Checkpoint checkpoint;
  ServerProcess server = serve(checkpoint);
  auto options = bridge_options(server, "vllm");
  options.free_cache_engine = true;
  BridgeEngine bridge(options, context_of(checkpoint));
  const rlcore::http::HttpJsonClient probe({server.url()});
  const auto is_sleeping = [&] { return probe.get_ok("/is_sleeping", rlcore::http::Retry::kNo).at("is_sleeping"); };
  bridge.sleep();
  CHECK(is_sleeping() == true);
  bridge.wake_up();
  bridge.load_weights(shifted_weights(checkpoint, 1.0), 1);
  CHECK(is_sleeping() == false);
  rlcore::infer_native::NativeEngine native({}, context_of(checkpoint));
  native.load_weights(shifted_weights(checkpoint, 1.0), 1);
  check_same(bridge.generate(kPrompts, greedy(6)), native.generate(kPrompts, greedy(6)));
}
