// infer-native generation against no-cache references: greedy, log-probs,
// batching, n samples, seeds, stop tokens, length limits, top-k / top-p.
#include "engine_testing.h"

using namespace infer_native_test;
using rlcore::FinishReason;
using rlcore::GenerationOutput;
using rlcore::SamplingParams;

TEST_CASE("greedy generation equals argmax decoding over full forwards without a cache", "[infer-native]") {
  for (const char* arch : {"llama", "qwen2", "qwen3", "deepseek_v3"}) {
    INFO("arch " << arch);
    Fixture fixture(arch);
    auto engine = make_engine(fixture.dir.path());
    const auto& prompt = test_prompts()[1];
    const GenerationOutput out = engine.generate({prompt}, greedy(12));
    REQUIRE(out.token_ids.size() == 1);
    CHECK(out.token_ids[0] == reference_greedy(fixture.model, prompt, 12));
    CHECK(out.finish_reasons[0] == FinishReason::kLength);
    // temperature 0: the log-probs are plain log_softmax.
    CHECK(max_abs_diff(out.logprobs[0], reference_logprobs(fixture.model, prompt, out.token_ids[0], 1.0)) < 1e-5);
  }
}

TEST_CASE("sampled log-probs equal a teacher-forced forward at the temperature", "[infer-native]") {
  Fixture fixture;
  auto engine = make_engine(fixture.dir.path());
  for (double temperature : {0.7, 1.0, 1.5}) {
    INFO("temperature " << temperature);
    SamplingParams params = sampled(10, 3, temperature);
    params.top_k = 50;  // shapes the draw only, never the reported log-probs
    params.top_p = 0.9;
    const GenerationOutput out = engine.generate(test_prompts(), params);
    REQUIRE(out.token_ids.size() == test_prompts().size());
    for (size_t i = 0; i < test_prompts().size(); ++i) {
      REQUIRE(out.token_ids[i].size() == 10);
      CHECK(max_abs_diff(out.logprobs[i],
                         reference_logprobs(fixture.model, test_prompts()[i], out.token_ids[i], temperature)) < 1e-5);
    }
  }
}

TEST_CASE("a batch of prompts of different lengths equals each prompt alone", "[infer-native]") {
  Fixture fixture("qwen2");
  auto engine = make_engine(fixture.dir.path());
  const GenerationOutput batched = engine.generate(test_prompts(), greedy(9));
  for (size_t i = 0; i < test_prompts().size(); ++i) {
    const GenerationOutput alone = engine.generate({test_prompts()[i]}, greedy(9));
    CHECK(batched.token_ids[i] == alone.token_ids[0]);
    CHECK(max_abs_diff(batched.logprobs[i], alone.logprobs[0]) < 1e-5);
  }
}

TEST_CASE("n samples are laid out prompt-major", "[infer-native]") {
  Fixture fixture;
  auto engine = make_engine(fixture.dir.path());
  SamplingParams params = greedy(6);
  params.n = 3;
  const GenerationOutput out = engine.generate(test_prompts(), params);
  REQUIRE(out.token_ids.size() == 9);
  REQUIRE(out.logprobs.size() == 9);
  REQUIRE(out.finish_reasons.size() == 9);
  for (size_t i = 0; i < 3; ++i) {
    const auto expected = reference_greedy(fixture.model, test_prompts()[i], 6);
    for (size_t j = 0; j < 3; ++j) CHECK(out.token_ids[i * 3 + j] == expected);
  }
  // Sampled: sample j of prompt i is prompt i's continuation (its log-probs say so).
  const GenerationOutput drawn = engine.generate(test_prompts(), [] {
    SamplingParams p = sampled(5, 11);
    p.n = 2;
    return p;
  }());
  REQUIRE(drawn.token_ids.size() == 6);
  for (size_t k = 0; k < 6; ++k) {
    CHECK(max_abs_diff(drawn.logprobs[k],
                       reference_logprobs(fixture.model, test_prompts()[k / 2], drawn.token_ids[k], 1.0)) < 1e-5);
  }
}

TEST_CASE("the same seed gives the same samples, another seed other samples", "[infer-native]") {
  Fixture fixture;
  auto engine = make_engine(fixture.dir.path());
  SamplingParams params = sampled(16, 1234);
  params.n = 2;
  const GenerationOutput first = engine.generate(test_prompts(), params);
  const GenerationOutput again = engine.generate(test_prompts(), params);
  CHECK(first.token_ids == again.token_ids);
  CHECK(first.logprobs == again.logprobs);
  // The two samples of one prompt come from different streams.
  CHECK(first.token_ids[0] != first.token_ids[1]);
  params.seed = 1235;
  const GenerationOutput other = engine.generate(test_prompts(), params);
  CHECK(other.token_ids != first.token_ids);

  SECTION("independent of max_num_seqs chunking") {
    rlcore::infer_native::NativeEngineOptions options;
    options.max_num_seqs = 2;  // 6 sequences in 3 chunks, one prompt split across two
    auto chunked = make_engine(fixture.dir.path(), options);
    params.seed = 1234;
    const GenerationOutput out = chunked.generate(test_prompts(), params);
    CHECK(out.token_ids == first.token_ids);
    for (size_t k = 0; k < out.logprobs.size(); ++k) CHECK(max_abs_diff(out.logprobs[k], first.logprobs[k]) < 1e-5);
  }
  SECTION("unseeded requests differ from one another, but repeat with the engine seed") {
    params.seed = -1;
    const GenerationOutput a = engine.generate(test_prompts(), params);
    const GenerationOutput b = engine.generate(test_prompts(), params);
    CHECK(a.token_ids != b.token_ids);
    auto fresh = make_engine(fixture.dir.path());
    CHECK(fresh.generate(test_prompts(), params).token_ids == a.token_ids);
  }
}

TEST_CASE("a stop token ends its sequence and is part of the response", "[infer-native]") {
  Fixture fixture;
  auto engine = make_engine(fixture.dir.path());
  const auto& prompt = test_prompts()[0];
  const auto full = engine.generate({prompt}, greedy(12)).token_ids[0];
  REQUIRE(full.size() == 12);
  // The first token (after the first two) that did not occur before it.
  size_t cut = 2;
  while (cut < full.size() && std::find(full.begin(), full.begin() + cut, full[cut]) != full.begin() + cut) ++cut;
  REQUIRE(cut < full.size());

  SamplingParams params = greedy(12);
  params.stop_token_ids = {full[cut], 318};
  const GenerationOutput out = engine.generate({prompt, test_prompts()[1]}, params);
  CHECK(out.token_ids[0] == std::vector<int32_t>(full.begin(), full.begin() + cut + 1));
  CHECK(out.finish_reasons[0] == FinishReason::kStop);
  CHECK(out.logprobs[0].size() == cut + 1);
  // The other row keeps going after the first leaves the batch, unchanged.
  const auto other = engine.generate({test_prompts()[1]}, params);
  CHECK(out.token_ids[1] == other.token_ids[0]);
  CHECK(out.finish_reasons[1] == other.finish_reasons[0]);
}

TEST_CASE("responses stop at max_tokens or max_model_len with reason length", "[infer-native]") {
  Fixture fixture;
  rlcore::infer_native::NativeEngineOptions options;
  options.max_model_len = 10;
  auto engine = make_engine(fixture.dir.path(), options);
  const GenerationOutput out = engine.generate({test_prompts()[0], test_prompts()[1]}, greedy(20));
  CHECK(out.token_ids[0].size() == 7);  // 3 prompt tokens + 7 = 10
  CHECK(out.token_ids[1].size() == 3);  // 7 + 3
  CHECK(out.finish_reasons[0] == FinishReason::kLength);
  CHECK(out.finish_reasons[1] == FinishReason::kLength);
  CHECK(out.token_ids[0] == reference_greedy(fixture.model, test_prompts()[0], 7));
  const std::string error = error_of<rlcore::ValueError>([&] { engine.generate({test_prompts()[2]}, greedy(1)); });
  CHECK_THAT(error, Catch::Contains("prompt 0") && Catch::Contains("max_model_len 10"));
}

TEST_CASE("top_k = 1 and a tiny top_p both equal greedy", "[infer-native]") {
  Fixture fixture("qwen3");
  auto engine = make_engine(fixture.dir.path());
  const GenerationOutput reference = engine.generate(test_prompts(), greedy(10));
  SamplingParams top_k = sampled(10, 5);
  top_k.top_k = 1;
  const GenerationOutput k_out = engine.generate(test_prompts(), top_k);
  CHECK(k_out.token_ids == reference.token_ids);
  for (size_t i = 0; i < 3; ++i) CHECK(max_abs_diff(k_out.logprobs[i], reference.logprobs[i]) < 1e-5);
  SamplingParams top_p = sampled(10, 6, 0.8);
  top_p.top_p = 1e-6;
  CHECK(engine.generate(test_prompts(), top_p).token_ids == reference.token_ids);
  // Plain sampling does leave the greedy path, so the two checks above can fail.
  CHECK(engine.generate(test_prompts(), sampled(10, 5)).token_ids != reference.token_ids);
}

TEST_CASE("bad requests are errors naming the field or prompt", "[infer-native]") {
  Fixture fixture;
  auto engine = make_engine(fixture.dir.path());
  CHECK(engine.generate({}, greedy(4)).token_ids.empty());
  CHECK_THAT(error_of<rlcore::ValueError>([&] {
               engine.generate({{1, 2}, {}}, greedy(4));
             }),
             Catch::Contains("prompt 1 is empty"));
  CHECK_THAT(error_of<rlcore::ValueError>([&] {
               engine.generate({{1, 320}}, greedy(4));
             }),
             Catch::Contains("prompt 0: token 1 has id 320"));
  SamplingParams params = greedy(4);
  params.top_p = 0;
  CHECK_THAT(error_of<rlcore::ValueError>([&] { engine.generate({{1}}, params); }), Catch::Contains("top_p"));
  params = greedy(0);
  CHECK_THAT(error_of<rlcore::ValueError>([&] { engine.generate({{1}}, params); }), Catch::Contains("max_tokens"));
  params = greedy(4);
  params.temperature = -1;
  CHECK_THAT(error_of<rlcore::ValueError>([&] { engine.generate({{1}}, params); }), Catch::Contains("temperature"));
  params = greedy(4);
  params.n = 0;
  CHECK_THAT(error_of<rlcore::ValueError>([&] { engine.generate({{1}}, params); }), Catch::Contains("n must"));
}
