// A mixture of experts in a train engine's micro-batches: routing replay
// (ReplaysRouting: each micro-batch's forward sends its tokens to the experts
// of the rows' routed_experts column) and recording (what the forward routed,
// for routing replay's R2 and for the router's losses).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/model/config.h"
#include "rlcore/model/layers.h"
#include "train-common/micro_batches.h"

namespace rlcore::train_common {

// An engine's routing settings (ReplaysRouting::set_routing_replay).
struct RoutingReplay {
  bool replay = false;
  bool record = false;
};

// ConfigError naming router_replay when `replay` asks for anything of a model
// that is not a mixture of experts.
void check_routing_replay(const RoutingReplay& replay, const model::ModelConfig& config, const std::string& engine);

// A micro-batch's per-token routing [1 or rows, tokens, sparse layers, top_k]
// in the padded layout [rows, P + R, ...]: a packed one's scattered back, its
// padding set to `fill`; a padded one's as it is.
at::Tensor padded_routing(const MicroBatch& micro, const at::Tensor& routed, int64_t fill);

// What the micro-batches of one pass routed and replay. Attached to them by
// attach(): they point into it, so it outlives the pass and never moves.
class MicroBatchRouting {
 public:
  // Each micro-batch's ctx replays its rows' columns::kRoutedExperts when
  // `replay` (ValueError naming the engine when the column is missing or
  // misshaped) and records into this object when `record`.
  MicroBatchRouting(std::vector<MicroBatch>& micro, const model::ModelConfig& config, bool replay, bool record,
                    const std::string& engine);
  MicroBatchRouting(const MicroBatchRouting&) = delete;
  MicroBatchRouting& operator=(const MicroBatchRouting&) = delete;

  // Micro-batch m's recorded routing (empty unless recording).
  model::MoeRouting& recorded(size_t m) { return recorded_[m]; }
  // Every micro-batch's recorded routing in the column's layout, in row
  // order: [rows, L, sparse layers, top_k] int16 on the CPU.
  at::Tensor stacked(const std::vector<MicroBatch>& micro, const model::ModelConfig& config) const;

 private:
  std::vector<model::MoeRouting> recorded_;
  std::vector<model::MoeRouting> replayed_;
};

}  // namespace rlcore::train_common
