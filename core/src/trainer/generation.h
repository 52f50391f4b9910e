// Private to the core: one rollout through the actor role's `generate`, with
// the weight-version check that keeps stale rollout weights from passing
// silently. Shared by the RL loop, validation and SFT validation.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/batch.h"
#include "rlcore/core/agent/agent_loop.h"
#include "rlcore/core/config/rollout_config.h"
#include "rlcore/core/data/dataset.h"
#include "rlcore/core/runtime/worker_group.h"
#include "rlcore/generation_request.h"
#include "rlcore/tokenizer/tokenizer.h"
#include "workers/worker_contract.h"

namespace rlcore::trainer {

struct Rollout {
  Batch batch;                                 // the engine layout + the rollout's columns + columns::kUid
  std::vector<const data::Example*> examples;  // row -> its prompt
  std::vector<GenerationStats> engine_stats;   // per rollout rank, where the engine reports them (summed over turns)
  // Multi-turn rollouts: each row's extra_info for the reward function (the
  // prompt's, plus __num_turns__, tool_rewards and turn_scores as verl's) and
  // the agent loop's metrics (num_turns/*, agent/*). Empty for single-turn.
  std::vector<nlohmann::json> extra_info;
  std::map<std::string, double> agent_metrics;
};

// The workers that generate and the method they do it with: the actor pool's
// colocated rollout (actor.generate) or a standalone rollout pool
// (rollout.generate, docs/async.md). Same arguments and reply.
struct RolloutWorkers {
  runtime::WorkerGroup& group;
  workers::GenerateMethod generate;
};

inline RolloutWorkers colocated_rollout(runtime::WorkerGroup& actor) {
  return RolloutWorkers{actor, workers::actor_methods::kGenerate};
}

struct GenerationLimits {
  int64_t max_tokens = 0;  // data.max_response_length
  std::vector<int32_t> stop_token_ids;
  int64_t pad_token_id = 0;
  // Set (actor_rollout_ref.rollout.multi_turn.enable): rollouts run the agent loop.
  std::shared_ptr<const agent::AgentLoop> agent_loop;
};

// max_tokens, the tokenizer's EOS as the stop token (none with rollout.ignore_eos) and its pad (else EOS,
// else 0) as padding.
GenerationLimits generation_limits(const Tokenizer& tokenizer, int64_t max_tokens,
                                   const config::RolloutConfig& rollout);

// Adds the stats of another generate() call (an agent loop's next turn) to `into`.
void add_generation_stats(GenerationStats& into, const GenerationStats& more);

// One call of `rollout`'s generate on `prompts` with `sampling`, max_tokens
// and the limits' stop and pad tokens; adds each rank's engine stats
// to `engine_stats` and checks the weight version as generate_rollout does.
Batch call_generate(const RolloutWorkers& rollout, const std::vector<std::vector<int32_t>>& prompts,
                    const workers::Sampling& sampling, const GenerationLimits& limits, int64_t max_tokens,
                    int64_t expected_version, std::vector<GenerationStats>& engine_stats);

// `n` responses per prompt, prompt-major; `uid` numbers the prompts; multi-turn
// through limits.agent_loop, one generate call per turn. Throws
// ValueError naming the rank when a reply's weight version is not
// `expected_version` (the version of the last sync_weights).
Rollout generate_rollout(const RolloutWorkers& rollout, const std::vector<const data::Example*>& prompts, int64_t n,
                         const workers::Sampling& sampling, const GenerationLimits& limits, int64_t expected_version);

}  // namespace rlcore::trainer
