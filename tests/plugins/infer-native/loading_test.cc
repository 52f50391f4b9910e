// infer-native loading: checkpoint directories (single file, sharded, broken),
// options, and the real plugin .so through the PluginLoader.
#include "engine_testing.h"

#include <fstream>

#include "rlcore/config_node.h"
#include "rlcore/core/plugin_loader.h"
#include "rlcore/registry.h"
#include "rlcore/safetensors/safetensors.h"
#include "../../common/test_paths.h"

using namespace infer_native_test;
using rlcore::SamplingParams;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace

TEST_CASE("a missing or empty model_path is a ConfigError naming it", "[infer-native]") {
  CHECK_THAT(error_of<rlcore::ConfigError>([] { make_engine(""); }), Catch::Contains("model_path is empty"));
  CHECK_THAT(error_of<rlcore::ConfigError>([] { make_engine("/nonexistent/rlcore/model"); }),
             Catch::Contains("'/nonexistent/rlcore/model'") && Catch::Contains("does not exist"));
}

TEST_CASE("checkpoint errors name the file or tensor at fault", "[infer-native]") {
  Fixture fixture;
  const fs::path dir = fixture.dir.path();
  SECTION("no config.json") {
    fs::remove(dir / "config.json");
    CHECK_THAT(error_of<rlcore::IoError>([&] { make_engine(dir); }), Catch::Contains("config.json"));
  }
  SECTION("a config.json with a bad field") {
    write_text(dir / "config.json", R"({"model_type": "gpt2"})");
    CHECK_THAT(error_of<rlcore::ConfigError>([&] { make_engine(dir); }), Catch::Contains("config.json"));
  }
  SECTION("no weights") {
    fs::remove(dir / "model.safetensors");
    CHECK_THAT(error_of<rlcore::IoError>([&] { make_engine(dir); }), Catch::Contains("model.safetensors"));
  }
  SECTION("a corrupt weights file") {
    write_text(dir / "model.safetensors", "not a safetensors file at all");
    CHECK_THAT(error_of<rlcore::FormatError>([&] { make_engine(dir); }), Catch::Contains("model.safetensors"));
  }
  SECTION("a missing tensor") {
    auto params = fixture.model.named_parameters();
    params.pop_back();
    rlcore::save_safetensors(dir / "model.safetensors", params);
    CHECK_THAT(error_of<rlcore::ValueError>([&] { make_engine(dir); }),
               Catch::Contains("model.norm.weight") && Catch::Contains(dir.string()));
  }
  SECTION("max_model_len beyond max_position_embeddings") {
    rlcore::infer_native::NativeEngineOptions options;
    options.max_model_len = 129;
    CHECK_THAT(error_of<rlcore::ConfigError>([&] { make_engine(dir, options); }), Catch::Contains("max_model_len 129"));
  }
}

TEST_CASE("a sharded checkpoint loads the same weights", "[infer-native]") {
  Fixture fixture("qwen2");
  TempDir sharded;
  write_checkpoint(sharded.path(), fixture.model, /*max_shard_bytes=*/64 * 1024);
  REQUIRE(fs::exists(sharded.path() / "model.safetensors.index.json"));
  REQUIRE_FALSE(fs::exists(sharded.path() / "model.safetensors"));
  auto engine = make_engine(sharded.path());
  CHECK(engine.generate(test_prompts(), greedy(6)).token_ids[1] ==
        reference_greedy(fixture.model, test_prompts()[1], 6));
}

TEST_CASE("dtype bfloat16 computes in bf16 and still returns fp32 log-probs", "[infer-native]") {
  Fixture fixture;
  rlcore::infer_native::NativeEngineOptions options;
  options.dtype = "bfloat16";
  auto engine = make_engine(fixture.dir.path(), options);
  CHECK(engine.dtype() == at::kBFloat16);
  CHECK(engine.weight_meta().front().dtype == at::kBFloat16);
  CHECK(engine.bytes_held() == rlcore::model::num_parameters(fixture.model.config()) * 2);
  const auto out = engine.generate(test_prompts(), greedy(6));
  // bf16 rounding may change a near-tie, so compare with a bf16 reference model.
  Transformer reference(fixture.model.config(), rlcore::model::ModelHead::kCausalLm,
                        at::TensorOptions().dtype(at::kBFloat16));
  reference.load(fixture.model.named_parameters());
  CHECK(out.token_ids[0] == reference_greedy(reference, test_prompts()[0], 6));
  for (float logprob : out.logprobs[0]) CHECK(logprob <= 0.0f);
}

TEST_CASE("the infer-native plugin loads through the PluginLoader and generates", "[infer-native][plugin]") {
  rlcore::Registry registry;
  rlcore::PluginLoader loader(registry);
  loader.load_path(rlcore_test::plugin_build_dir() + "/librlcore-infer-native.so");
  for (const auto& refused : loader.refused()) INFO(refused.file << ": " << refused.reason);
  REQUIRE(loader.loaded().size() == 1);
  CHECK(loader.loaded()[0].name == "infer-native");
  const rlcore::ComponentEntry& entry = registry.get(rlcore::InferenceEngine::kKind, "native");
  // dtype, max_model_len, max_num_seqs, max_waiting_requests, enable_prefix_caching, static_batching, seed,
  // tensor_model_parallel_size, enforce_eager
  CHECK(entry.keys.size() == 9);
  CHECK(registry.capabilities(rlcore::InferenceEngine::kKind, "native") ==
        std::vector<std::string>{"adopts_weights", "tensor_parallel", "sleep", "requests", "generation_stats",
                                 "records_routing", "logprobs"});

  Fixture fixture;
  rlcore::ComponentContext context;
  context.model_path = fixture.dir.str();
  const auto options = rlcore::ConfigNode::parse("max_num_seqs: 2\nseed: 7\n", "test");
  auto engine = registry.create<rlcore::InferenceEngine>("native", options, context);
  const auto out = engine->generate(test_prompts(), greedy(7));
  REQUIRE(out.token_ids.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(out.token_ids[i] == reference_greedy(fixture.model, test_prompts()[i], 7));

  CHECK_THAT(error_of<rlcore::ConfigError>([&] {
               registry.create<rlcore::InferenceEngine>("native", rlcore::ConfigNode::parse("max_num_seq: 2", "t"),
                                                        context);
             }),
             Catch::Contains("max_num_seq"));
  CHECK_THAT(error_of<rlcore::ConfigError>([&] {
               registry.create<rlcore::InferenceEngine>("native", rlcore::ConfigNode::parse("dtype: fp8", "t"),
                                                        context);
             }),
             Catch::Contains("dtype"));
  CHECK_THAT(error_of<rlcore::ConfigError>(
                 [&] { registry.create<rlcore::InferenceEngine>("native", rlcore::ConfigNode(), {}); }),
             Catch::Contains("model_path"));
}
