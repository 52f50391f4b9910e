// Request-level generation (SDK 5.1): one response at a time, submitted,
// stepped, streamed, aborted and resumed. The types the GeneratesRequests
// capability (rlcore/capabilities.h) takes and gives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rlcore/inference_engine.h"

namespace rlcore {

// Tokens a request has generated, with the log-prob of each (as
// GenerationOutput's) and the version of the weights that sampled it.
struct GeneratedTokens {
  std::vector<int32_t> token_ids;
  std::vector<float> logprobs;
  std::vector<int64_t> weight_versions;

  size_t size() const { return token_ids.size(); }
  bool empty() const { return token_ids.empty(); }
  void append(const GeneratedTokens& more) {
    token_ids.insert(token_ids.end(), more.token_ids.begin(), more.token_ids.end());
    logprobs.insert(logprobs.end(), more.logprobs.begin(), more.logprobs.end());
    weight_versions.insert(weight_versions.end(), more.weight_versions.begin(), more.weight_versions.end());
  }
};

struct GenerationRequest {
  std::string id;  // unique among the engine's unfinished requests
  std::vector<int32_t> prompt_ids;
  // n must be 1 (submit n requests for n samples; equal prompts admitted
  // together share one prefill). max_tokens counts `resumed` too. seed -1:
  // the engine draws one and reports it in RequestOutput::seed.
  SamplingParams sampling;
  // Resuming (e.g. after an abort at a weight update): the tokens earlier
  // segments of this request generated. The engine prefills prompt + these,
  // continues after them and reports them first in its output; with the
  // earlier segment's seed, a sampled request continues the same random
  // stream, so a resume under unchanged weights gives the uninterrupted tokens.
  GeneratedTokens resumed;
};

struct RequestOutput {
  std::string id;
  GeneratedTokens generated;                           // the resumed tokens first
  FinishReason finish_reason = FinishReason::kLength;  // kStop, kLength or kAbort
  int64_t prompt_tokens = 0;
  int64_t seed = -1;  // the seed it sampled with (drawn by the engine when the request gave -1)
};

// The tokens one step added to a running request (for streaming).
struct TokenDelta {
  std::string id;
  GeneratedTokens tokens;
};

// What GeneratesRequests::step() did: every request that gained tokens, and
// those that finished (a finished request is also in `deltas` with its last token).
struct StepOutput {
  std::vector<TokenDelta> deltas;
  std::vector<RequestOutput> finished;
};

struct GenerationLoad {
  int64_t running = 0;      // requests in the decode batch
  int64_t waiting = 0;      // submitted, not yet admitted
  int64_t free_slots = 0;   // sequence slots free in the decode batch (max_num_seqs - running)
  int64_t max_waiting = 0;  // submit() refuses requests beyond this many waiting
  int64_t kv_tokens = 0;    // KV-cache slots (rows x positions) allocated now
};

// What the last generate() did inside the engine (ReportsGenerationStats):
// how full its decode batches ran and how long sequences queued for a slot.
struct GenerationStats {
  int64_t decode_steps = 0;  // decode forwards
  int64_t running_rows = 0;  // sequences those forwards decoded, summed (/ decode_steps: the mean batch)
  int64_t max_running = 0;   // the fullest decode batch
  int64_t max_waiting = 0;   // the most sequences waiting for a slot (max_num_seqs bounds the batch)
  int64_t prefill_rows = 0;  // prompt rows prefilled (a prompt's samples share one where the engine can)
  int64_t joins = 0;         // times waiting sequences joined a running batch
};

}  // namespace rlcore
