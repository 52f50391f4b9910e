// Continuous batching for infer-native: sequences wait in a queue, join the
// running decode batch as soon as a slot is free (their prompts prefilled,
// one prefill per distinct prompt) and leave it when they finish, so a long
// response no longer holds the rest of the batch back.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "decode_step.h"
#include "rlcore/model/kv_cache.h"
#include "rlcore/model/transformer.h"
#include "sequence.h"

namespace rlcore::infer_native {

struct SchedulerOptions {
  int64_t max_num_seqs = 256;  // sequences in the decode batch at once
  // Samples of one prompt admitted together share its prefill (vLLM's enable_prefix_caching).
  bool share_prefill = true;
  // Admit only into an empty batch: the whole batch finishes before the next
  // one starts (static batching, the pre-5.1 behaviour; a benchmark baseline).
  bool static_batches = false;
  DecodeMode mode = DecodeMode::kEager;
  // Each sequence keeps the experts its tokens were routed to (Sequence::routed):
  // a mixture of experts only, not with kDeviceGraph.
  bool record_routing = false;
};

class Scheduler {
 public:
  Scheduler(const model::Transformer& model, SchedulerOptions options);
  Scheduler(const Scheduler&) = delete;  // its stepper refers to its cache and stats
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a sequence (validated by the caller); it joins at a later step().
  void add(std::unique_ptr<Sequence> sequence);

  struct Step {
    std::vector<Sequence*> advanced;  // sequences that got a token (finished ones included)
    std::vector<std::unique_ptr<Sequence>> finished;
  };
  // Admits waiting sequences into free slots (prefill), then samples one token
  // for every running sequence, tagged `weight_version`; finished sequences
  // leave, the others are fed their token. Runs under InferenceMode.
  Step step(int64_t weight_version);

  // Takes sequence `id` out (waiting or running), or null if there is none.
  std::unique_ptr<Sequence> remove(const std::string& id);
  // Takes every sequence out, waiting ones first, each in its order.
  std::vector<std::unique_ptr<Sequence>> remove_all();

  bool contains(const std::string& id) const;
  Sequence* find(const std::string& id) const;  // waiting or running; null if neither
  int64_t running() const { return live_; }
  int64_t waiting() const { return static_cast<int64_t>(waiting_.size()); }
  bool idle() const { return live_ == 0 && waiting_.empty(); }
  int64_t kv_slots() const { return cache_.batch_size() * cache_.max_len(); }
  const SchedulerOptions& options() const { return options_; }
  // Accumulated since construction (or the last take_stats()).
  DecodeStats take_stats();

 private:
  void admit();
  // Keeps the rows whose sequence is still there (every live row, in order)
  // and returns their indices, or undefined when no row left.
  at::Tensor compact();
  void reset_batch();
  // `routing` when the scheduler records routing, else null.
  model::MoeRouting* recording(model::MoeRouting* routing) const;

  const model::Transformer& model_;
  SchedulerOptions options_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  // rows_[r]: the sequence of batch row r, null once it left while its row
  // stays (shape-static steps keep a batch shape as long as they can).
  std::vector<std::unique_ptr<Sequence>> rows_;
  int64_t live_ = 0;
  model::KvCache cache_;
  at::Tensor logits_;  // [rows, vocab]: every row's next-token logits, not yet sampled
  DecodeStats stats_;
  std::optional<DecodeStepper> stepper_;
};

}  // namespace rlcore::infer_native
