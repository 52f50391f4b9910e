// The decode modes against each other: shape-static steps (what a CUDA graph
// records and replays) give the eager steps' tokens and log-probs while rows
// finish at different steps, stay in the batch, and leave it in compactions.
#include "engine_testing.h"

#include "decode_loop.h"

using namespace infer_native_test;
using rlcore::SamplingParams;
using rlcore::infer_native::decode_batch;
using rlcore::infer_native::DecodeMode;
using rlcore::infer_native::DecodeStats;
using rlcore::infer_native::Sequence;
using rlcore::infer_native::SequenceRng;

namespace {

// Two samples per test prompt, each with its own token limit, so rows finish
// at steps 2, 3, 5, 8, 9 and 12.
std::vector<Sequence> sequences() {
  const int64_t limits[] = {9, 3, 12, 5, 2, 8};
  std::vector<Sequence> out;
  for (int64_t i = 0; i < 6; ++i) {
    out.push_back(Sequence{i / 2, limits[i], SequenceRng(7, i), {}, {}, rlcore::FinishReason::kLength});
  }
  return out;
}

struct Decoded {
  std::vector<Sequence> sequences;
  DecodeStats stats;
};

Decoded decode(const Transformer& model, const SamplingParams& params, DecodeMode mode) {
  Decoded out{sequences(), {}};
  std::vector<Sequence*> batch;
  for (Sequence& seq : out.sequences) batch.push_back(&seq);
  out.stats = decode_batch(model, test_prompts(), batch, params, mode);
  return out;
}

void check_same(const Decoded& actual, const Decoded& expected) {
  for (size_t i = 0; i < expected.sequences.size(); ++i) {
    INFO("sequence " << i);
    CHECK(actual.sequences[i].token_ids == expected.sequences[i].token_ids);
    CHECK(actual.sequences[i].finish_reason == expected.sequences[i].finish_reason);
    CHECK(max_abs_diff(actual.sequences[i].logprobs, expected.sequences[i].logprobs) < 1e-5);
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
  for (const char* arch : {"llama", "qwen3"}) {
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

      // A stop token ends rows early in both modes alike.
      params.stop_token_ids = {eager.sequences[2].token_ids[4]};
      const Decoded stopped = decode(model, params, DecodeMode::kEager);
      CHECK(stopped.sequences[2].finish_reason == rlcore::FinishReason::kStop);
      check_same(decode(model, params, DecodeMode::kShapeStatic), stopped);
    }
  }
}

TEST_CASE("enforce_eager: false decodes eagerly where graphs cannot be recorded", "[infer-native]") {
  Fixture fixture;
  rlcore::infer_native::NativeEngineOptions options;
  options.enforce_eager = false;
  options.max_num_seqs = 2;  // two batches, whose stats add up
  auto engine = make_engine(fixture.dir.path(), options);
  CHECK(engine.decode_mode() == DecodeMode::kEager);  // the CPU has no CUDA graphs
  SamplingParams params = sampling(0.0);
  const rlcore::GenerationOutput out = engine.generate(test_prompts(), params);
  CHECK(out.token_ids[1] == reference_greedy(fixture.model, test_prompts()[1], 12));
  const DecodeStats stats = engine.last_decode_stats();
  CHECK(stats.steps == 2 * 11);
  CHECK(stats.graphs_recorded == 0);
}
