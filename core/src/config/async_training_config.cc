// Schemas and validation of async_training and the rollout pool (see async_training_config.h).
#include "rlcore/core/config/async_training_config.h"

#include "rlcore/error.h"

namespace rlcore::config {

OptionsSchema<AsyncTrainingConfig> async_training_schema() {
  OptionsSchema<AsyncTrainingConfig> schema;
  schema
      .key("mode", &AsyncTrainingConfig::mode,
           "sync: generate, then train, on the actor's workers (the hybrid engine); one_step_off: a standalone "
           "rollout pool generates the next step's batch while the actor trains on this one; fully_async: the pool "
           "generates continuously, request by request, within a staleness budget (docs/async.md).",
           one_of({"sync", "one_step_off", "fully_async"}))
      .key("staleness_threshold", &AsyncTrainingConfig::staleness_threshold,
           "fully_async: after a sync the rollout may start (1 + this) x trigger_parameter_sync_step x "
           "data.train_batch_size prompts, less those not yet trained on; 0: none ahead of the window.",
           at_least(0))
      .key("trigger_parameter_sync_step", &AsyncTrainingConfig::trigger_parameter_sync_step,
           "fully_async: steps (updates) between weight syncs to the rollout pool.", at_least(1))
      .key("partial_rollout", &AsyncTrainingConfig::partial_rollout,
           "fully_async: a sync reaches the requests in flight (their later tokens sampled by the new weights); "
           "false: they finish under the old weights first.")
      .key("decode_steps_per_call", &AsyncTrainingConfig::decode_steps_per_call,
           "fully_async (rlcore's key): decode steps the pool runs per call before reporting finished samples; a "
           "sync or a validation waits at most that long for the pool.",
           at_least(1))
      .key("max_staleness", &AsyncTrainingConfig::max_staleness,
           "fully_async (rlcore's key, prime-rl's max_off_policy_steps): a prompt with a sample token sampled more "
           "than this many updates before the step is dropped, not trained on (async/stale_dropped), and the pool "
           "starts another in its place; -1: none, the staleness budget alone bounds staleness (the producer waits).",
           at_least(-1))
      .key("on_rollout_failure", &AsyncTrainingConfig::on_rollout_failure,
           "fully_async (rlcore's key): fail: a lost rollout worker ends the run, naming it; restart: the run goes on "
           "generating on the other rollout workers while a replacement comes up (the local launcher starts it; an "
           "external launcher must start one within rejoin_timeout_s), which gets the actor's current weights at the "
           "next sync; the lost worker's unfinished requests are resubmitted (async/lost_requests). Needs rollout "
           "tensor_model_parallel_size 1 (docs/async.md#faults).",
           one_of({"fail", "restart"}))
      .key("rejoin_timeout_s", &AsyncTrainingConfig::rejoin_timeout_s,
           "fully_async with on_rollout_failure restart (rlcore's key): seconds a lost rollout worker's replacement "
           "may take to connect and set up before the run ends.",
           greater_than(0));
  return schema;
}

OptionsSchema<RolloutPoolConfig> rollout_pool_schema() {
  OptionsSchema<RolloutPoolConfig> schema;
  schema
      .key("nnodes", &RolloutPoolConfig::nnodes, "Nodes of the standalone rollout pool (async_training.mode).",
           at_least(1))
      .key("n_gpus_per_node", &RolloutPoolConfig::n_gpus_per_node,
           "Workers per node of the standalone rollout pool: GPUs, or processes with trainer.device cpu.", at_least(1));
  return schema;
}

void validate(const AsyncTrainingConfig& config) {
  const std::string& mode = config.mode;
  if (config.on_rollout_failure == "restart" && mode != "fully_async") {
    throw ConfigError(
        "async_training.on_rollout_failure: restart replaces a worker of the standalone rollout pool of "
        "async_training.mode fully_async; in mode " +
        mode +
        (mode == "sync" ? std::string(" the rollout runs on the actor's workers (the hybrid engine): a lost one is a "
                                      "lost trainer rank, which ends the run")
                        : std::string(" every step's generation is one call across the pool, which a lost worker "
                                      "fails")));
  }
  if (config.max_staleness >= 0 && mode != "fully_async") {
    throw ConfigError("async_training.max_staleness applies to async_training.mode: fully_async (" +
                      (mode == "sync" ? std::string("sync trains on policy")
                                      : "one_step_off trains on batches exactly one update stale") +
                      ")");
  }
  if (mode == "sync") return;
  const int64_t sync_every = config.trigger_parameter_sync_step;
  if (config.max_staleness >= 0 && config.max_staleness < sync_every - 1) {
    // Between syncs the pool's weights fall up to sync_every - 1 updates behind the trainer's:
    // every group would be dropped and the run would never reach its next sync.
    throw ConfigError("async_training.max_staleness " + std::to_string(config.max_staleness) +
                      " is below trigger_parameter_sync_step - 1 (" + std::to_string(sync_every - 1) +
                      "): samples are that stale between syncs, so every group would be dropped");
  }
}

}  // namespace rlcore::config
