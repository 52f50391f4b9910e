// One batch's decode steps, run eagerly, shape-static, or as a replayed device
// graph (rollout.enforce_eager: false on a GPU).
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "rlcore/device_graph.h"
#include "rlcore/model/kv_cache.h"
#include "rlcore/model/transformer.h"

namespace rlcore::infer_native {

enum class DecodeMode {
  kEager,        // Transformer::forward over the used slots; finished rows leave at once
  kShapeStatic,  // Transformer::forward_decode over all slots; finished rows stay until half have finished
  kDeviceGraph,  // kShapeStatic, recorded once per batch shape and replayed
};

// What a Scheduler did (scheduler.h), for tests and benchmarks.
struct DecodeStats {
  int64_t steps = 0;  // decode forwards (the prefill not counted)
  int64_t graphs_recorded = 0;
  int64_t graph_replays = 0;
  int64_t compactions = 0;   // times finished rows left the batch
  int64_t prefills = 0;      // prefill forwards (one per admission of waiting sequences)
  int64_t prefill_rows = 0;  // prompts those prefilled (samples of one prompt share a row)
  int64_t joins = 0;         // admissions into a running batch (a cache copy each)
  int64_t running_rows = 0;  // live sequences decoded, summed over the steps
  int64_t max_running = 0;   // the most live sequences one step decoded
  int64_t max_waiting = 0;   // the most sequences waiting for a slot at a step

  DecodeStats& operator+=(const DecodeStats& other);
};

class DecodeStepper {
 public:
  // kDeviceGraph needs DeviceGraph::supported(the model's device).
  DecodeStepper(const model::Transformer& model, model::KvCache& cache, DecodeMode mode, DecodeStats& stats);

  // tokens [B] int64 on the model's device -> next-token logits [B, vocab]. In
  // kDeviceGraph the logits live in the graph's memory until the next step.
  // Throws Error when recording the graph fails (naming enforce_eager).
  // `routing` records what the step routed (not in kDeviceGraph, whose replays
  // run no host code).
  at::Tensor step(const at::Tensor& tokens, model::MoeRouting* routing = nullptr);
  // Keeps the cache rows `rows` (KvCache::keep_rows); a recorded graph is dropped.
  void keep_rows(const at::Tensor& rows);
  DecodeMode mode() const { return mode_; }

 private:
  at::Tensor step_shape_static(const at::Tensor& tokens, model::MoeRouting* routing);

  const model::Transformer& model_;
  model::KvCache& cache_;
  DecodeMode mode_;
  DecodeStats& stats_;
  at::Tensor slot_;    // [1] int64: cache_.used, on the device
  at::Tensor tokens_;  // [B, 1] int64: the recorded step's input
  at::Tensor logits_;  // [B, vocab]: the recorded step's output
  DeviceGraph graph_;
};

}  // namespace rlcore::infer_native
