// async_training and the top-level rollout section: how rollout and training
// are scheduled (docs/async.md), and the standalone rollout pool's size.
#pragma once

#include <cstdint>
#include <string>

#include "rlcore/export.h"
#include "rlcore/options.h"

namespace rlcore::config {

// verl's async_training section; `mode` is rlcore's (verl picks a recipe's entry point).
struct AsyncTrainingConfig {
  std::string mode =
      "sync";  // sync (colocated, the hybrid engine) | one_step_off | fully_async (a standalone rollout pool)
  // fully_async (verl's keys and its recipe's defaults):
  double staleness_threshold = 0.1;         // extra share of a sync window's prompts the rollout may start
  int64_t trigger_parameter_sync_step = 4;  // steps between weight syncs
  bool partial_rollout = true;              // a sync reaches requests in flight (else they finish first)
  int64_t decode_steps_per_call = 16;       // rlcore's: decode steps of each stream call (a sync waits at most that)
  int64_t max_staleness = -1;               // rlcore's: drop a prompt with a token staler than this; -1: none
  std::string on_rollout_failure = "fail";  // rlcore's: fail | restart (replace a lost rollout worker)
  double rejoin_timeout_s = 120;            // rlcore's: how long a replacement may take to be set up
};

// verl's top-level `rollout` section of its asynchronous recipes: the
// standalone rollout pool's size (workers: GPUs, or processes on the CPU).
struct RolloutPoolConfig {
  int64_t nnodes = 1;
  int64_t n_gpus_per_node = 1;
};

RLCORE_API OptionsSchema<AsyncTrainingConfig> async_training_schema();
RLCORE_API OptionsSchema<RolloutPoolConfig> rollout_pool_schema();

// max_staleness against the mode and the sync period. Throws ConfigError.
RLCORE_API void validate(const AsyncTrainingConfig& config);

}  // namespace rlcore::config
