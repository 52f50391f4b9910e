// Routing replay and recording over a pass's micro-batches.
#include "train-common/micro_batch_routing.h"

#include <ATen/ATen.h>

#include "rlcore/columns.h"
#include "rlcore/error.h"
#include "rlcore/model/routing.h"

namespace rlcore::train_common {

void check_routing_replay(const RoutingReplay& replay, const model::ModelConfig& config, const std::string& engine) {
  if ((replay.replay || replay.record) && !config.is_moe()) {
    throw ConfigError(engine + ": actor_rollout_ref.actor.router_replay: " + config.model_type +
                      " is not a mixture of experts (no router to replay)");
  }
}

MicroBatchRouting::MicroBatchRouting(std::vector<MicroBatch>& micro, const model::ModelConfig& config, bool replay,
                                     bool record, const std::string& engine)
    : recorded_(record ? micro.size() : 0), replayed_(replay ? micro.size() : 0) {
  for (size_t m = 0; m < micro.size(); ++m) {
    if (record) micro[m].ctx.routing = &recorded_[m];
    if (!replay) continue;
    if (!micro[m].rows.contains(columns::kRoutedExperts)) {
      throw ValueError(engine + ": routing replay needs the batch's " + columns::kRoutedExperts + " column");
    }
    const at::Tensor& routed = micro[m].rows.tensor(columns::kRoutedExperts);
    if (routed.dim() != 4 || routed.size(1) != micro[m].input_ids.size(1)) {
      throw ValueError(engine + ": " + columns::kRoutedExperts + " must be [rows, " +
                       std::to_string(micro[m].input_ids.size(1)) + " tokens, sparse layers, top_k], got " +
                       std::to_string(routed.dim()) + " dimensions");
    }
    replayed_[m] = model::unstack_routing(routed, config, micro[m].input_ids.device());
    micro[m].ctx.replay = &replayed_[m];
  }
}

at::Tensor MicroBatchRouting::stacked(const std::vector<MicroBatch>& micro, const model::ModelConfig& config) const {
  std::vector<at::Tensor> parts;
  for (size_t m = 0; m < micro.size(); ++m) {
    parts.push_back(model::stack_routing(recorded_[m], config, micro[m].input_ids.sizes()).to(at::kCPU, at::kShort));
  }
  return at::cat(parts);
}

}  // namespace rlcore::train_common
