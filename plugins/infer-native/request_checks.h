// What infer-native refuses before generating: prompts of a generate() call
// and single requests of the GeneratesRequests capability.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rlcore/generation_request.h"

namespace rlcore::infer_native {

// ValueError naming the prompt: empty, an id outside [0, vocab_size), or no
// room to generate under max_model_len.
void check_prompts(const std::vector<std::vector<int32_t>>& prompts, int64_t vocab_size, int64_t max_model_len);

// ValueError naming the request: an empty id, n != 1, bad sampling params, an
// empty or out-of-vocabulary prompt or resumed token, resumed lists of
// different lengths or already at max_tokens, or prompt + max_tokens past
// max_model_len (a request is refused rather than cut short).
void check_request(const GenerationRequest& request, int64_t vocab_size, int64_t max_model_len);

// ValueError naming `which`: a count of top log-probs outside [at_least, vocab_size].
void check_top_logprobs(int64_t top_logprobs, int64_t at_least, int64_t vocab_size, const std::string& which);

// ValueError for a sequence to score: empty, an id outside [0, vocab_size), or
// longer than max_model_len.
void check_scored_ids(const std::vector<int32_t>& ids, int64_t vocab_size, int64_t max_model_len);

}  // namespace rlcore::infer_native
