// Private to the core: the actor's weights to a standalone rollout pool
// (docs/async.md, verl's checkpoint engine). Actor rank 0 and every rollout
// rank share one process group, the bridge (rank 0: the actor). Every actor
// rank takes part in gathering the full parameters one at a time; rank 0 packs
// them into buckets of at most `bucket_bytes` (a larger parameter goes alone)
// and broadcasts each. Each rollout rank converts what arrived into its
// engine's layout (WeightAdaptor, its TP shard included) and loads the targets
// a bucket completed in one load_weights call, so a rank holds a bucket (and
// its converted targets) and the sources of targets still missing one, never a
// second copy of the model.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "rlcore/comm_context.h"
#include "rlcore/inference_engine.h"
#include "rlcore/weight_adaptor.h"

namespace rlcore::workers {

struct WeightTransferStats {
  int64_t bytes = 0;  // parameter bytes through the bridge
  int64_t buckets = 0;
  int64_t tensors = 0;  // parameters sent (actor) / targets loaded (rollout)
  double seconds = 0;
};

// Visits full parameters by name, one at a time (TrainEngine::for_each_full_parameter).
using ParameterVisitor = std::function<void(const std::function<void(const std::string&, const at::Tensor&)>&)>;

// The actor's side. `bridge`: null on actor ranks other than 0, which only
// take part in the gather. Collective over the actor pool and the bridge.
WeightTransferStats send_weights(const ParameterVisitor& for_each_parameter, const CommGroup* bridge,
                                 int64_t bucket_bytes);

// A rollout rank's side: loads every target of engine.weight_meta() with
// `version`; the buckets arrive on `device` (the sender's kind of device). Throws ValueError naming a target whose
// sources never arrived, or a parameter that arrived with the wrong shape for the adaptor.
WeightTransferStats receive_weights(InferenceEngine& engine, const WeightAdaptor& adaptor, const RolloutLayout& layout,
                                    const CommGroup& bridge, const at::Device& device, int64_t version);

}  // namespace rlcore::workers
