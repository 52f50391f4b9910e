// Token sampling for infer-native: greedy / temperature / top-k / top-p over a
// batch of next-token logits, per-sequence random streams, and the log-prob of
// each sampled token under the temperature-scaled full-vocabulary distribution.
#pragma once

#include <cstdint>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "rlcore/inference_engine.h"

namespace rlcore::infer_native {

// Throws ValueError naming the first out-of-range field of `params`.
void validate_sampling(const SamplingParams& params);

inline bool is_greedy(const SamplingParams& params) { return params.temperature == 0.0; }

// The random stream of one sequence, seeded from the request seed and the
// sequence's prompt-major index, so its samples do not depend on which other
// sequences share its batch (max_num_seqs chunking, finished rows leaving).
class SequenceRng {
 public:
  SequenceRng(uint64_t request_seed, int64_t sequence_index);
  double uniform();  // in [0, 1)

 private:
  at::Generator generator_;
};

struct SampledTokens {
  at::Tensor tokens;    // [B] int64
  at::Tensor logprobs;  // [B] float32
  // With top_logprobs K > 0: the K most likely tokens of each row's
  // distribution (the log-probs' own), [B, K] int64 and float32, most likely first.
  at::Tensor top_tokens;
  at::Tensor top_logprobs;
};

// logits [B, V] (any float dtype). `uniforms` [B] float64 in [0, 1), one per
// row, drives the inverse-CDF draw; unused (may be undefined) when greedy.
// Log-probs are log_softmax(logits / temperature) in fp32 over the full
// vocabulary (temperature 1 when greedy): top-k / top-p shape only the draw.
SampledTokens sample_tokens(const at::Tensor& logits, const SamplingParams& params, const at::Tensor& uniforms,
                            int64_t top_logprobs = 0);

}  // namespace rlcore::infer_native
