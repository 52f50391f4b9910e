// Private to the core: one rollout through the actor role's `generate`, with
// the weight-version check that keeps stale rollout weights from passing
// silently. Shared by the RL loop, validation and SFT validation.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/batch.h"
#include "rlcore/core/data/dataset.h"
#include "rlcore/core/runtime/worker_group.h"
#include "rlcore/generation_request.h"
#include "rlcore/tokenizer.h"

namespace rlcore::trainer {

struct Rollout {
  Batch batch;                           // the engine layout + the rollout's columns + columns::kUid
  std::vector<const Example*> examples;  // row -> its prompt
  std::vector<GenerationStats> engine_stats;  // per rollout rank, where the engine reports them
};

struct GenerationLimits {
  int64_t max_tokens = 0;  // data.max_response_length
  std::vector<int32_t> stop_token_ids;
  int64_t pad_token_id = 0;
};

// max_tokens, the tokenizer's EOS as the stop token and its pad (else EOS, else 0) as padding.
GenerationLimits generation_limits(const Tokenizer& tokenizer, int64_t max_tokens);

// `n` responses per prompt, prompt-major; `uid` numbers the prompts. Throws
// ValueError naming the rank when a reply's weight version is not
// `expected_version` (the version of the last sync_weights).
Rollout generate_rollout(WorkerGroup& actor, const std::vector<const Example*>& prompts, int64_t n,
                         const nlohmann::json& sampling, const GenerationLimits& limits, int64_t expected_version);

}  // namespace rlcore::trainer
