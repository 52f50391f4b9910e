// The /v1/completions exchange as vLLM (and rlcore serve) speak it: token-id
// prompts in, sampled token ids and their log-probs out, prompt-major.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/inference_engine.h"

namespace rlcore::infer_vllm_bridge {

// The request body for `prompts` (token ids). `seed` < 0 leaves sampling
// unseeded; log-probs come back for the sampled tokens only (logprobs: 0).
nlohmann::json completion_request(const std::string& model, const std::vector<std::vector<int32_t>>& prompts,
                                  const SamplingParams& sampling, int64_t seed);

// Reads a response to a request of `prompts` prompts with `n` samples each.
// Throws FormatError naming the field (and choice) for anything malformed:
// missing or non-integer token ids, log-probs that do not match the tokens,
// wrong choice count or indices, an unknown finish_reason.
GenerationOutput parse_completion_response(const nlohmann::json& body, std::size_t prompts, int64_t n);

}  // namespace rlcore::infer_vllm_bridge
