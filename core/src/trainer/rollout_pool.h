// Private to the core: the controller's side of a standalone rollout pool
// (async_training.mode: one_step_off; docs/async.md): the bridge between the
// actor's rank 0 and the rollout's ranks, joined once, and the versioned
// weight syncs over it.
#pragma once

#include <cstdint>

#include "rlcore/core/runtime/worker_group.h"
#include "trainer/generation.h"
#include "trainer/step_metrics.h"

namespace rlcore::trainer {

class RolloutPool {
 public:
  // Joins the bridge (both pools at once). The pool starts with the
  // checkpoint's weights, version 0.
  RolloutPool(runtime::WorkerGroup& actor, runtime::WorkerGroup& rollout, int64_t bucket_bytes);

  RolloutWorkers workers() const { return RolloutWorkers{rollout_, workers::rollout_methods::kGenerate}; }
  int64_t version() const { return version_; }

  // The actor's weights to the pool as `version` (nothing when the pool has
  // that version): every actor rank gathers, rank 0 broadcasts in buckets, each
  // rollout rank loads. Adds timing_s/sync_rollout_weights, perf/weight_sync_bytes
  // and perf/weight_sync_GBps to `metrics`. The pool must not be generating.
  void sync(int64_t version, StepMetrics& metrics);

 private:
  runtime::WorkerGroup& actor_;
  runtime::WorkerGroup& rollout_;
  int64_t bucket_bytes_;
  int64_t version_ = 0;
};

}  // namespace rlcore::trainer
