// infer-native's weight lifecycle: weight_meta, (partial) load_weights with
// versions and errors, sleep releasing memory, wake_up + reload.
#include "engine_testing.h"

using namespace infer_native_test;
using rlcore::NamedTensorList;
using rlcore::SamplingParams;

namespace {

NamedTensorList to_list(const rlcore::model::NamedTensors& tensors) { return {tensors.begin(), tensors.end()}; }

}  // namespace

TEST_CASE("weight_meta lists parameter_specs with the engine dtype", "[infer-native]") {
  Fixture fixture("qwen2");
  auto engine = make_engine(fixture.dir.path());
  const auto meta = engine.weight_meta();
  const auto specs = rlcore::model::parameter_specs(fixture.model.config());
  REQUIRE(meta.size() == specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    CHECK(meta[i].name == specs[i].name);
    CHECK(meta[i].shape == specs[i].shape);
    CHECK(meta[i].dtype == at::kFloat);
  }
  CHECK(meta.front().name == "model.embed_tokens.weight");
}

TEST_CASE("load_weights replaces weights in buckets and reports the version", "[infer-native]") {
  Fixture fixture;
  auto engine = make_engine(fixture.dir.path());
  CHECK(engine.weight_version() == 0);
  const auto prompts = test_prompts();
  const auto before = engine.generate(prompts, greedy(8));
  CHECK(before.weight_version == 0);

  const Transformer other = random_model(fixture.model.config(), 99);
  const auto params = other.named_parameters();
  const size_t half = params.size() / 2;
  engine.load_weights(NamedTensorList(params.begin(), params.begin() + half), 6);
  engine.load_weights(NamedTensorList(params.begin() + half, params.end()), 7);
  CHECK(engine.weight_version() == 7);
  const auto after = engine.generate(prompts, greedy(8));
  CHECK(after.weight_version == 7);
  CHECK(after.token_ids != before.token_ids);
  for (size_t i = 0; i < prompts.size(); ++i) CHECK(after.token_ids[i] == reference_greedy(other, prompts[i], 8));

  SECTION("bad tensors are named, load nothing and keep the version") {
    NamedTensorList bad = {{"model.norm.weight", fixture.model.norm.weight},
                           {"model.layers.1.mlp.up_proj.weight", at::zeros({3, 3})}};
    CHECK_THAT(error_of<rlcore::ValueError>([&] { engine.load_weights(bad, 8); }),
               Catch::Contains("model.layers.1.mlp.up_proj.weight") && Catch::Contains("[3, 3]"));
    CHECK_THAT(error_of<rlcore::ValueError>([&] {
                 engine.load_weights({{"model.bogus.weight", at::zeros({1})}}, 8);
               }),
               Catch::Contains("model.bogus.weight"));
    CHECK(engine.weight_version() == 7);
    CHECK(engine.generate(prompts, greedy(8)).token_ids == after.token_ids);
  }
  SECTION("weights in another dtype are converted") {
    rlcore::model::NamedTensors bf16;
    for (const auto& [name, tensor] : fixture.model.named_parameters())
      bf16.emplace_back(name, tensor.to(at::kBFloat16));
    engine.load_weights(to_list(bf16), 8);
    CHECK(engine.weight_version() == 8);
    CHECK(engine.bytes_held() == rlcore::model::num_parameters(fixture.model.config()) * 4);  // still fp32
    Transformer rounded = random_model(fixture.model.config(), 0);
    rounded.load(bf16);
    CHECK(engine.generate(prompts, greedy(8)).token_ids[2] == reference_greedy(rounded, prompts[2], 8));
  }
}

TEST_CASE("sleep frees the weights, wake_up + load_weights restores identical outputs", "[infer-native]") {
  Fixture fixture("qwen3");
  auto engine = make_engine(fixture.dir.path());
  const auto prompts = test_prompts();
  const auto before = engine.generate(prompts, greedy(8));
  const int64_t held = engine.bytes_held();
  CHECK(held == rlcore::model::num_parameters(fixture.model.config()) * 4);

  engine.sleep();
  CHECK(engine.asleep());
  CHECK(engine.bytes_held() == 0);
  CHECK(engine.bytes_released() == held);
  CHECK_THAT(error_of<rlcore::ValueError>([&] { engine.generate(prompts, greedy(8)); }), Catch::Contains("asleep"));
  CHECK_THAT(error_of<rlcore::ValueError>([&] { engine.load_weights(to_list(fixture.model.named_parameters()), 1); }),
             Catch::Contains("wake_up"));
  engine.sleep();  // idempotent
  CHECK(engine.bytes_released() == held);

  engine.wake_up();
  CHECK_FALSE(engine.asleep());
  CHECK(engine.bytes_held() == held);
  // Woken but not reloaded: the storage holds garbage, so generating is refused.
  CHECK_THAT(error_of<rlcore::ValueError>([&] { engine.generate(prompts, greedy(8)); }),
             Catch::Contains("reloaded") && Catch::Contains("missing"));
  const auto params = fixture.model.named_parameters();
  engine.load_weights(NamedTensorList(params.begin(), params.end() - 1), 3);
  CHECK_THAT(error_of<rlcore::ValueError>([&] { engine.generate(prompts, greedy(8)); }),
             Catch::Contains("1 parameter(s)") && Catch::Contains(params.back().first));
  engine.load_weights(NamedTensorList(params.end() - 1, params.end()), 4);
  const auto after = engine.generate(prompts, greedy(8));
  CHECK(after.token_ids == before.token_ids);
  CHECK(after.logprobs == before.logprobs);
  CHECK(after.weight_version == 4);
}
