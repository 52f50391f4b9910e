// Request-level generation (GeneratesRequests) on infer-native: requests that
// join a busy batch at other steps give the batch path's tokens and log-probs,
// abort returns a prefix, a resumed request continues where it stopped, bad
// requests fail alone, and the queues stay bounded.
#include "engine_testing.h"

#include <functional>
#include <map>

using namespace infer_native_test;
using rlcore::FinishReason;
using rlcore::GenerationRequest;
using rlcore::RequestOutput;
using rlcore::SamplingParams;
using rlcore::infer_native::NativeEngine;
using rlcore::infer_native::NativeEngineOptions;

namespace {

GenerationRequest request(const std::string& id, std::vector<int32_t> prompt, SamplingParams sampling) {
  GenerationRequest r;
  r.id = id;
  r.prompt_ids = std::move(prompt);
  r.sampling = std::move(sampling);
  return r;
}

// Steps until every request has finished and `submit_more(step)` (called
// before each step, e.g. to submit) has returned false.
std::map<std::string, RequestOutput> drain(NativeEngine& engine, const std::function<bool(int64_t)>& submit_more = {}) {
  std::map<std::string, RequestOutput> done;
  bool more = true;
  for (int64_t step = 0; step < 10000; ++step) {
    if (more) more = submit_more && submit_more(step);
    const rlcore::GenerationLoad load = engine.load();
    if (!more && load.running == 0 && load.waiting == 0) break;
    for (RequestOutput& out : engine.step().finished) done.emplace(out.id, std::move(out));
  }
  return done;
}

// A prompt of `length` ids from a fixed pattern.
std::vector<int32_t> prompt_of(int64_t length, int64_t salt) {
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < length; ++t) ids.push_back(static_cast<int32_t>((salt * 37 + t * 11 + 3) % 310));
  return ids;
}

}  // namespace

TEST_CASE("requests joining a busy batch give the batch path's tokens and log-probs", "[infer-native][requests]") {
  Fixture fixture("qwen3");
  NativeEngine engine = make_engine(fixture.dir.path());
  NativeEngine reference = make_engine(fixture.dir.path());
  for (double temperature : {0.0, 1.0}) {
    INFO("temperature " << temperature);
    // 24 requests of different prompt lengths and limits, submitted 3 per
    // step: each joins a batch whose other rows are at other positions.
    std::vector<GenerationRequest> requests;
    for (int64_t i = 0; i < 24; ++i) {
      requests.push_back(request("r" + std::to_string(i), prompt_of(2 + (i * 5) % 17, i),
                                 sampled(3 + (i * 7) % 19, 100 + i, temperature)));
    }
    const auto done = drain(engine, [&](int64_t step) {
      for (int64_t i = 3 * step; i < std::min<int64_t>(24, 3 * step + 3); ++i) engine.submit(requests[i]);
      return 3 * step + 3 < 24;
    });
    REQUIRE(done.size() == 24);
    for (const GenerationRequest& r : requests) {
      INFO(r.id);
      // The same request alone through the batch path (its seed gives stream 0 of that seed).
      const rlcore::GenerationOutput alone = reference.generate({r.prompt_ids}, r.sampling);
      const RequestOutput& out = done.at(r.id);
      CHECK(out.generated.token_ids == alone.token_ids[0]);
      CHECK(out.finish_reason == alone.finish_reasons[0]);
      CHECK(max_abs_diff(out.generated.logprobs, alone.logprobs[0]) < 1e-5);
      CHECK(out.generated.weight_versions == std::vector<int64_t>(out.generated.size(), 0));
      CHECK(out.prompt_tokens == static_cast<int64_t>(r.prompt_ids.size()));
      CHECK(out.seed == r.sampling.seed);
    }
  }
  const auto stats = engine.take_request_stats();
  CHECK(stats.joins > 0);  // requests did join running batches
}

TEST_CASE("greedy requests equal generate() over many prompts at once", "[infer-native][requests]") {
  Fixture fixture;
  NativeEngineOptions options;
  options.max_num_seqs = 4;  // most requests wait for a slot
  NativeEngine engine = make_engine(fixture.dir.path(), options);
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t i = 0; i < 10; ++i) prompts.push_back(prompt_of(3 + i, i));
  const rlcore::GenerationOutput batch = engine.generate(prompts, greedy(9));
  for (size_t i = 0; i < prompts.size(); ++i) engine.submit(request(std::to_string(i), prompts[i], greedy(9)));
  int64_t most_running = 0;
  std::map<std::string, RequestOutput> done;
  while (engine.load().running + engine.load().waiting > 0) {
    for (RequestOutput& out : engine.step().finished) done.emplace(out.id, std::move(out));
    most_running = std::max(most_running, engine.load().running);
  }
  CHECK(most_running == 4);
  for (size_t i = 0; i < prompts.size(); ++i) {
    INFO("prompt " << i);
    CHECK(done.at(std::to_string(i)).generated.token_ids == batch.token_ids[i]);
    CHECK(done.at(std::to_string(i)).generated.token_ids == reference_greedy(fixture.model, prompts[i], 9));
  }
}

TEST_CASE("abort returns the prefix generated so far; resuming continues it", "[infer-native][requests]") {
  Fixture fixture;
  NativeEngine engine = make_engine(fixture.dir.path());
  for (double temperature : {0.0, 1.0}) {
    INFO("temperature " << temperature);
    const SamplingParams params = sampled(14, 5, temperature);
    const std::vector<int32_t> prompt = test_prompts()[1];
    const rlcore::GenerationOutput whole = engine.generate({prompt}, params);

    engine.submit(request("a", prompt, params));
    engine.submit(request("b", test_prompts()[2], params));  // keeps the batch busy
    for (int i = 0; i < 5; ++i) engine.step();
    const std::optional<RequestOutput> partial = engine.abort("a");
    REQUIRE(partial.has_value());
    CHECK(partial->finish_reason == FinishReason::kAbort);
    REQUIRE(partial->generated.size() == 5);
    CHECK(std::equal(partial->generated.token_ids.begin(), partial->generated.token_ids.end(),
                     whole.token_ids[0].begin()));
    CHECK(engine.load().running == 1);
    CHECK_FALSE(engine.abort("a").has_value());        // no longer there
    CHECK_FALSE(engine.abort("unknown").has_value());  // never was

    // Resumed with the same seed under the same weights: the uninterrupted tokens.
    GenerationRequest resumed = request("a", prompt, params);
    resumed.sampling.seed = partial->seed;
    resumed.resumed = partial->generated;
    engine.submit(resumed);
    const auto done = drain(engine);
    REQUIRE(done.count("a") == 1);
    CHECK(done.at("a").generated.token_ids == whole.token_ids[0]);
    CHECK(done.at("a").finish_reason == whole.finish_reasons[0]);
    CHECK(max_abs_diff(done.at("a").generated.logprobs, whole.logprobs[0]) < 1e-5);
    CHECK(done.count("b") == 1);
  }
}

TEST_CASE("tokens carry the version of the weights that sampled them", "[infer-native][requests]") {
  Fixture fixture;
  NativeEngine engine = make_engine(fixture.dir.path());
  engine.load_weights({}, 1);
  engine.submit(request("v", test_prompts()[0], greedy(10)));
  for (int i = 0; i < 4; ++i) engine.step();
  // A weight update between steps: the request keeps running (keep mode).
  const Transformer other = random_model(tiny_config(), 9);
  engine.load_weights(other.named_parameters(), 2);
  const auto done = drain(engine);
  const std::vector<int64_t> versions = done.at("v").generated.weight_versions;
  REQUIRE(versions.size() == 10);
  CHECK(std::vector<int64_t>(versions.begin(), versions.begin() + 4) == std::vector<int64_t>(4, 1));
  CHECK(std::vector<int64_t>(versions.begin() + 4, versions.end()) == std::vector<int64_t>(6, 2));

  // Abort at the update and resume under the new weights: the resumed tokens keep version 2's tokens' own.
  engine.submit(request("w", test_prompts()[0], greedy(10)));
  for (int i = 0; i < 3; ++i) engine.step();
  const std::optional<RequestOutput> partial = engine.abort("w");
  REQUIRE(partial);
  engine.load_weights(fixture.model.named_parameters(), 3);
  GenerationRequest resumed = request("w", test_prompts()[0], greedy(10));
  resumed.resumed = partial->generated;
  engine.submit(resumed);
  const auto resumed_done = drain(engine);
  const RequestOutput& w = resumed_done.at("w");
  REQUIRE(w.generated.size() == 10);
  CHECK(std::vector<int32_t>(w.generated.token_ids.begin(), w.generated.token_ids.begin() + 3) ==
        partial->generated.token_ids);
  CHECK(std::vector<int64_t>(w.generated.weight_versions.begin(), w.generated.weight_versions.begin() + 3) ==
        std::vector<int64_t>(3, 2));
  CHECK(std::vector<int64_t>(w.generated.weight_versions.begin() + 3, w.generated.weight_versions.end()) ==
        std::vector<int64_t>(7, 3));
  // Under version 3 (the fixture's weights) the continuation is greedy decoding of prompt + prefix.
  std::vector<int32_t> context = test_prompts()[0];
  context.insert(context.end(), partial->generated.token_ids.begin(), partial->generated.token_ids.end());
  CHECK(std::vector<int32_t>(w.generated.token_ids.begin() + 3, w.generated.token_ids.end()) ==
        reference_greedy(fixture.model, context, 7));
}

TEST_CASE("a sampled request that a weight sync reaches in flight, the weights unchanged, is the unbroken request",
          "[infer-native][requests]") {
  // The fully asynchronous trainer's partial rollouts: the sync loads the weights
  // between decode steps and the request goes on with its KV cache.
  Fixture fixture;
  NativeEngine engine = make_engine(fixture.dir.path());
  const SamplingParams params = sampled(14, 11, 1.0);
  const std::vector<int32_t> prompt = test_prompts()[1];
  const rlcore::GenerationOutput whole = engine.generate({prompt}, params);
  engine.submit(request("p", prompt, params));
  for (int i = 0; i < 6; ++i) engine.step();
  engine.load_weights(fixture.model.named_parameters(), 7);
  const auto done = drain(engine);
  const RequestOutput& p = done.at("p");
  CHECK(p.generated.token_ids == whole.token_ids[0]);
  CHECK(max_abs_diff(p.generated.logprobs, whole.logprobs[0]) < 1e-5);
  REQUIRE(p.generated.size() > 6);
  CHECK(p.generated.weight_versions.back() == 7);
}

TEST_CASE("a bad request fails alone with an error naming it", "[infer-native][requests]") {
  Fixture fixture;
  NativeEngineOptions options;
  options.max_model_len = 40;
  NativeEngine engine = make_engine(fixture.dir.path(), options);
  engine.submit(request("good", test_prompts()[1], greedy(8)));
  engine.step();
  CHECK_THAT(error_of<rlcore::ValueError>([&] {
               engine.submit(request("oov", {5, 320}, greedy(4)));
             }),
             Catch::Contains("request 'oov'") && Catch::Contains("id 320") && Catch::Contains("vocabulary"));
  CHECK_THAT(error_of<rlcore::ValueError>([&] { engine.submit(request("long", prompt_of(30, 1), greedy(20))); }),
             Catch::Contains("request 'long'") && Catch::Contains("max_model_len 40"));
  CHECK_THAT(error_of<rlcore::ValueError>([&] {
               engine.submit(request("good", {1, 2}, greedy(4)));
             }),
             Catch::Contains("request 'good'") && Catch::Contains("already"));
  SamplingParams two = greedy(4);
  two.n = 2;
  CHECK_THAT(error_of<rlcore::ValueError>([&] {
               engine.submit(request("n2", {1, 2}, two));
             }),
             Catch::Contains("request 'n2'") && Catch::Contains("n must be 1"));
  CHECK_THAT(error_of<rlcore::ValueError>([&] {
               engine.submit(request("", {1, 2}, greedy(4)));
             }),
             Catch::Contains("id is empty"));
  CHECK_THAT(error_of<rlcore::ValueError>([&] { engine.submit(request("empty", {}, greedy(4))); }),
             Catch::Contains("request 'empty'") && Catch::Contains("prompt is empty"));
  CHECK(engine.load().waiting == 0);
  const auto done = drain(engine);
  REQUIRE(done.size() == 1);
  CHECK(done.at("good").generated.token_ids == reference_greedy(fixture.model, test_prompts()[1], 8));
}

TEST_CASE("the waiting queue is bounded and sleep waits for no request", "[infer-native][requests]") {
  Fixture fixture;
  NativeEngineOptions options;
  options.max_num_seqs = 1;
  options.max_waiting_requests = 2;
  NativeEngine engine = make_engine(fixture.dir.path(), options);
  engine.submit(request("a", {1, 2, 3}, greedy(5)));
  engine.submit(request("b", {1, 2, 3}, greedy(5)));
  CHECK_THAT(error_of<rlcore::OverloadedError>([&] {
               engine.submit(request("c", {1, 2, 3}, greedy(5)));
             }),
             Catch::Contains("request 'c'") && Catch::Contains("max_waiting_requests 2"));
  engine.step();  // "a" runs, one waits: room for another
  engine.submit(request("c", {1, 2, 3}, greedy(5)));
  rlcore::GenerationLoad load = engine.load();
  CHECK(load.running == 1);
  CHECK(load.waiting == 2);
  CHECK(load.free_slots == 0);
  CHECK(load.kv_tokens > 0);
  CHECK_THAT(error_of<rlcore::ValueError>([&] { engine.sleep(); }), Catch::Contains("3 request(s) in flight"));
  CHECK(engine.abort("b"));
  CHECK(engine.abort("a"));
  CHECK(engine.abort("c"));
  load = engine.load();
  CHECK(load.running + load.waiting == 0);
  CHECK(load.kv_tokens == 0);
  engine.sleep();
  CHECK_THAT(error_of<rlcore::ValueError>([&] { engine.submit(request("d", {1}, greedy(2))); }),
             Catch::Contains("asleep"));
}

TEST_CASE("samples of one prompt share its prefill unless prefix caching is off", "[infer-native][requests]") {
  Fixture fixture;
  for (bool share : {true, false}) {
    INFO("enable_prefix_caching " << share);
    NativeEngineOptions options;
    options.enable_prefix_caching = share;
    NativeEngine engine = make_engine(fixture.dir.path(), options);
    SamplingParams params = sampled(6, 3);
    params.n = 4;
    const rlcore::GenerationOutput out = engine.generate(test_prompts(), params);
    const auto stats = engine.last_decode_stats();
    CHECK(stats.prefills == 1);
    CHECK(stats.prefill_rows == (share ? 3 : 12));
    // Either way the samples are the same: sharing changes no number.
    NativeEngineOptions other = options;
    other.enable_prefix_caching = !share;
    const rlcore::GenerationOutput again = make_engine(fixture.dir.path(), other).generate(test_prompts(), params);
    CHECK(again.token_ids == out.token_ids);
  }
}

TEST_CASE("the generation stats count decoded rows, the fullest batch and the queue behind max_num_seqs",
          "[infer-native][requests]") {
  Fixture fixture;
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t i = 0; i < 8; ++i) prompts.push_back(prompt_of(4, i));
  NativeEngineOptions options;
  options.max_num_seqs = 3;
  NativeEngine engine = make_engine(fixture.dir.path(), options);
  const int64_t length = 5;
  const rlcore::GenerationOutput out = engine.generate(prompts, sampled(length, 4));  // no stop tokens
  for (const auto& row : out.token_ids) REQUIRE(static_cast<int64_t>(row.size()) == length);
  const rlcore::GenerationStats stats = engine.last_generation_stats();
  // Every token but a sequence's last is fed back through one decode forward.
  CHECK(stats.running_rows == 8 * (length - 1));
  CHECK(stats.max_running == 3);
  CHECK(stats.max_waiting == 5);
  CHECK(stats.prefill_rows == 8);
  CHECK(stats.decode_steps == engine.last_decode_stats().steps);
  // Equal lengths: waves of 3, 3 and 2 that finish together, so none joins a running batch.
  CHECK(stats.decode_steps == 3 * (length - 1));
  CHECK(stats.joins == 0);
}

TEST_CASE("static batching gives the same responses in more steps", "[infer-native][requests]") {
  Fixture fixture;
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t i = 0; i < 8; ++i) prompts.push_back(prompt_of(4, i));
  SamplingParams params = sampled(16, 21);
  params.stop_token_ids = {7, 11, 13, 17, 19, 23, 29, 31};  // responses of many lengths
  auto run = [&](bool static_batching) {
    NativeEngineOptions options;
    options.max_num_seqs = 3;
    options.static_batching = static_batching;
    NativeEngine engine = make_engine(fixture.dir.path(), options);
    auto out = engine.generate(prompts, params);
    return std::make_pair(out, engine.last_decode_stats());
  };
  const auto [continuous, continuous_stats] = run(false);
  const auto [batched, batched_stats] = run(true);
  CHECK(continuous.token_ids == batched.token_ids);
  CHECK(continuous_stats.steps <= batched_stats.steps);
  CHECK(continuous_stats.joins > 0);
  CHECK(batched_stats.joins == 0);
}

TEST_CASE("top log-probs nobody takes are kept for the newest requests only", "[infer-native][requests]") {
  Fixture fixture("qwen3");
  NativeEngine engine = make_engine(fixture.dir.path());
  SamplingParams greedy;
  greedy.max_tokens = 1;
  const auto kept = static_cast<int64_t>(NativeEngine::kFinishedTopKept);
  int64_t submitted = 0;
  // A client that leaves never takes its request's top log-probs.
  const auto done = drain(engine, [&](int64_t) {
    for (int i = 0; i < 512 && submitted < kept + 8; ++i, ++submitted) {
      engine.submit_with_top_logprobs(request("r" + std::to_string(submitted), prompt_of(3, submitted), greedy), 2);
    }
    return submitted < kept + 8;
  });
  CHECK(static_cast<int64_t>(done.size()) == kept + 8);
  CHECK(engine.take_top_logprobs("r0").empty());  // the oldest were dropped
  CHECK(engine.take_top_logprobs("r7").empty());
  CHECK(engine.take_top_logprobs("r8").size() == 1);  // the newest kept: one token's
  CHECK(engine.take_top_logprobs("r" + std::to_string(kept + 7)).size() == 1);
}
