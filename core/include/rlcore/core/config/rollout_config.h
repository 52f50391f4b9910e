// actor_rollout_ref.rollout: how responses are generated (sampling, log-prob
// passes, validation sampling, the agent loop, weights to a standalone pool).
// Keys the section does not declare are the inference engine's (engine_options).
#pragma once

#include <cstdint>
#include <string>

#include "rlcore/config_node.h"
#include "rlcore/core/agent/agent_config.h"
#include "rlcore/export.h"
#include "rlcore/options.h"

namespace rlcore::config {

struct ValidationSampling {
  int64_t n = 1;
  double temperature = 0.0;
  int64_t top_k = -1;
  double top_p = 1.0;
  bool do_sample = false;  // false: greedy whatever the temperature
};

// verl's actor_rollout_ref.rollout.checkpoint_engine: the actor's weights to a
// standalone rollout pool (docs/async.md).
struct CheckpointEngineConfig {
  int64_t update_weights_bucket_megabytes = 2048;  // parameters per broadcast over the bridge
};

struct RolloutConfig {
  std::string name = "native";  // the inference_engine to build
  int64_t n = 1;                // responses per prompt
  double temperature = 1.0;
  int64_t top_k = -1;
  double top_p = 1.0;
  bool ignore_eos = false;  // verl's SamplingParams(ignore_eos): EOS is no stop token, responses run to the limit
  int64_t log_prob_micro_batch_size_per_gpu = 0;
  bool log_prob_use_dynamic_bsz = false;
  int64_t log_prob_max_token_len_per_gpu = 16384;
  ValidationSampling val_kwargs;
  std::string sharding_manager = "bucketed";  // the sharding_manager switching actor <-> rollout
  agent::MultiTurnConfig multi_turn;          // verl's multi_turn: the agent loop (docs/agent-loop.md)
  agent::AgentSection agent;
  CheckpointEngineConfig checkpoint_engine;
  bool enable_rollout_routing_replay = false;  // the rollout records each token's experts (routed_experts)
  bool exact_logprobs = false;                 // the batch-invariant forward in both engines (docs/exact-logprobs.md)
  ConfigNode engine_options;                   // the inference engine's keys (dtype, max_num_seqs, ...)
};

RLCORE_API OptionsSchema<RolloutConfig> rollout_schema();

}  // namespace rlcore::config
