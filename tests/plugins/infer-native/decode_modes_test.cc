// The decode modes against each other: shape-static steps (what a CUDA graph
// records and replays) give the eager steps' tokens and log-probs while rows
// finish at different steps, stay in the batch, and leave it in compactions.
#include "engine_testing.h"

#include "scheduler.h"

using namespace infer_native_test;
using rlcore::SamplingParams;
using rlcore::infer_native::DecodeMode;
using rlcore::infer_native::DecodeStats;
using rlcore::infer_native::Scheduler;
using rlcore::infer_native::SchedulerOptions;
using rlcore::infer_native::Sequence;

namespace {

struct Decoded {
  std::vector<std::unique_ptr<Sequence>> sequences;  // in submission order
  DecodeStats stats;
};

// Two samples per test prompt, each with its own token limit, so rows finish
// at steps 2, 3, 5, 8, 9 and 12; all admitted at the first step.
Decoded decode(const Transformer& model, const SamplingParams& params, DecodeMode mode) {
  const int64_t limits[] = {9, 3, 12, 5, 2, 8};
  SchedulerOptions options;
  options.mode = mode;
  Scheduler scheduler(model, options);
  std::vector<Sequence*> order;
  for (int64_t i = 0; i < 6; ++i) {
    auto prompt = std::make_shared<const std::vector<int32_t>>(test_prompts()[i / 2]);
    auto seq = std::make_unique<Sequence>(std::to_string(i), prompt, params, limits[i], 7, i);
    order.push_back(seq.get());
    scheduler.add(std::move(seq));
  }
  std::vector<std::unique_ptr<Sequence>> done;
  while (!scheduler.idle()) {
    for (auto& seq : scheduler.step(0).finished) done.push_back(std::move(seq));
  }
  Decoded out;
  for (Sequence* seq : order) {
    for (auto& owned : done) {
      if (owned.get() == seq) out.sequences.push_back(std::move(owned));
    }
  }
  REQUIRE(out.sequences.size() == 6);
  out.stats = scheduler.take_stats();
  return out;
}

void check_same(const Decoded& actual, const Decoded& expected) {
  for (size_t i = 0; i < expected.sequences.size(); ++i) {
    INFO("sequence " << i);
    CHECK(actual.sequences[i]->generated.token_ids == expected.sequences[i]->generated.token_ids);
    CHECK(actual.sequences[i]->finish_reason == expected.sequences[i]->finish_reason);
    CHECK(max_abs_diff(actual.sequences[i]->generated.logprobs, expected.sequences[i]->generated.logprobs) < 1e-5);
  }
}

SamplingParams sampling(double temperature) {
  SamplingParams params;
  params.temperature = temperature;
  params.max_tokens = 12;
  return params;
}

}  // namespace

TEST_CASE("shape-static decode steps give the eager steps' tokens and log-probs", "[infer-native]") {
  for (const char* arch : {"llama", "qwen3", "deepseek_v3"}) {
    const Transformer model = random_model(tiny_config(arch), 3);
    for (double temperature : {0.0, 1.0}) {
      INFO(arch << ", temperature " << temperature);
      SamplingParams params = sampling(temperature);
      const Decoded eager = decode(model, params, DecodeMode::kEager);
      const Decoded shape_static = decode(model, params, DecodeMode::kShapeStatic);
      check_same(shape_static, eager);
      // Both step until the longest row is done; the eager batch shrinks at
      // each of the five earlier finishes, the static one once half are done.
      CHECK(eager.stats.steps == 11);
      CHECK(shape_static.stats.steps == 11);
      CHECK(eager.stats.compactions == 5);
      CHECK(shape_static.stats.compactions >= 1);
      CHECK(shape_static.stats.compactions < eager.stats.compactions);
      CHECK(shape_static.stats.graphs_recorded == 0);
      CHECK(eager.stats.prefills == 1);
      CHECK(eager.stats.prefill_rows == 3);  // one per distinct prompt

      // A stop token ends rows early in both modes alike.
      params.stop_token_ids = {eager.sequences[2]->generated.token_ids[4]};
      const Decoded stopped = decode(model, params, DecodeMode::kEager);
      CHECK(stopped.sequences[2]->finish_reason == rlcore::FinishReason::kStop);
      check_same(decode(model, params, DecodeMode::kShapeStatic), stopped);
    }
  }
}

TEST_CASE("enforce_eager: false decodes eagerly where graphs cannot be recorded", "[infer-native]") {
  Fixture fixture;
  rlcore::infer_native::NativeEngineOptions options;
  options.enforce_eager = false;
  options.max_num_seqs = 2;  // the third prompt waits for a free slot
  auto engine = make_engine(fixture.dir.path(), options);
  CHECK(engine.decode_mode() == DecodeMode::kEager);  // the CPU has no CUDA graphs
  SamplingParams params = sampling(0.0);
  const rlcore::GenerationOutput out = engine.generate(test_prompts(), params);
  CHECK(out.token_ids[1] == reference_greedy(fixture.model, test_prompts()[1], 12));
  const DecodeStats stats = engine.last_decode_stats();
  CHECK(stats.steps == 2 * 11);  // the first two finish together, then the third runs alone
  CHECK(stats.graphs_recorded == 0);
  CHECK(stats.prefills == 2);
}
