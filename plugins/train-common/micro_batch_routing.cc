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

at::Tensor padded_routing(const MicroBatch& micro, const at::Tensor& routed, int64_t fill) {
  if (!micro.packing) return routed;
  const int64_t width = micro.prompt_len + micro.response_len;
  const at::Tensor per_token = routed.select(0, 0);
  return at::full({micro.num_rows * width, per_token.size(1), per_token.size(2)}, fill, per_token.options())
      .index_copy(0, micro.packing->token_index, per_token)
      .view({micro.num_rows, width, per_token.size(1), per_token.size(2)});
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
    const int64_t width = micro[m].prompt_len + micro[m].response_len;
    if (routed.dim() != 4 || routed.size(1) != width) {
      throw ValueError(engine + ": " + columns::kRoutedExperts + " must be [rows, " + std::to_string(width) +
                       " tokens, sparse layers, top_k], got " + std::to_string(routed.dim()) + " dimensions");
    }
    const Packing* packing = micro[m].packing ? &*micro[m].packing : nullptr;
    const at::Tensor tokens = packing != nullptr ? routed.reshape({-1, routed.size(2), routed.size(3)})
                                                       .index_select(0, packing->token_index.to(routed.device()))
                                                 : routed;
    replayed_[m] = model::unstack_routing(tokens, config, micro[m].input_ids.device());
    micro[m].ctx.replay = &replayed_[m];
  }
}

at::Tensor MicroBatchRouting::stacked(const std::vector<MicroBatch>& micro, const model::ModelConfig& config) const {
  std::vector<at::Tensor> parts;
  for (size_t m = 0; m < micro.size(); ++m) {
    const at::Tensor routed = model::stack_routing(recorded_[m], config, micro[m].input_ids.sizes()).to(at::kShort);
    parts.push_back(padded_routing(micro[m], routed, -1).cpu());  // padding routed nowhere
  }
  return at::cat(parts);
}

}  // namespace rlcore::train_common
