// Private to the core: the controller's side of a standalone rollout pool
// (async_training.mode: one_step_off, fully_async; docs/async.md): the bridge
// between the actor's rank 0 and the rollout's ranks, and the versioned weight
// syncs over it. A replaceable pool (on_rollout_failure: restart) re-forms the
// bridge with the replacement of a lost worker at the next sync.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

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

  // The ranks generating with the pool's weights: alive, and not a
  // replacement still waiting for them. Thread-safe.
  std::vector<int64_t> serving() const;
  // Whether a rank is lost or a replacement waits for the weights. Thread-safe.
  bool has_down_ranks() const;

  // The actor's weights to the pool as `version` (nothing when the pool has
  // that version and every rank serves): every actor rank gathers, rank 0
  // broadcasts in buckets, each rollout rank loads. First, when a rank was
  // lost, waits for its replacement and re-forms the bridge with it
  // (async/rollout_workers_replaced). Adds timing_s/sync_rollout_weights,
  // perf/weight_sync_bytes and perf/weight_sync_GBps to `metrics`. The pool
  // must not be generating.
  void sync(int64_t version, StepMetrics& metrics);

 private:
  void join_bridge();
  std::vector<int64_t> incarnations() const;

  runtime::WorkerGroup& actor_;
  runtime::WorkerGroup& rollout_;
  int64_t bucket_bytes_;
  int64_t version_ = 0;
  int64_t bridge_generation_ = 0;
  mutable std::mutex mutex_;
  std::vector<int64_t> synced_;  // per rank: the incarnation of the worker that has the pool's weights
};

}  // namespace rlcore::trainer
