// One batch of infer-native generation: left-padded prefill of the distinct
// prompts, cache rows copied per sample, then batched decode steps from which
// finished sequences leave (KvCache::keep_rows): at once when eager, once half
// the rows have finished when the steps are shape-static (decode_step.h).
#pragma once

#include <cstdint>
#include <vector>

#include "decode_step.h"
#include "rlcore/inference_engine.h"
#include "rlcore/model/transformer.h"
#include "sampling.h"

namespace rlcore::infer_native {

// One sampled response being generated.
struct Sequence {
  int64_t prompt = 0;  // index into the prompts given to decode_batch
  int64_t limit = 0;   // most tokens it may generate (>= 1)
  SequenceRng rng;
  std::vector<int32_t> token_ids;
  std::vector<float> logprobs;
  FinishReason finish_reason = FinishReason::kLength;
};

// Generates every sequence of `sequences` in one batch. Prompts must be
// non-empty, in the vocabulary, and ordered so that the sequences' prompt
// indices are non-decreasing (prompt-major). Runs under InferenceMode. Every
// mode gives the same tokens, and log-probs equal up to rounding.
DecodeStats decode_batch(const model::Transformer& model, const std::vector<std::vector<int32_t>>& prompts,
                         std::vector<Sequence*>& sequences, const SamplingParams& params,
                         DecodeMode mode = DecodeMode::kEager);

}  // namespace rlcore::infer_native
