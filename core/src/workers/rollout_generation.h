// Private to the core: what both rollout roles share (the actor's colocated
// rollout and the standalone rollout pool's): where a worker sits in the
// rollout's layout, and `generate`'s arguments and reply.
#pragma once

#include <cstdint>

#include "rlcore/batch.h"
#include "rlcore/comm_context.h"
#include "rlcore/core/runtime/role.h"
#include "rlcore/inference_engine.h"
#include "rlcore/weight_adaptor.h"
#include "workers/worker_contract.h"

namespace rlcore::workers {

// Where this worker sits in the rollout: its kRolloutTpGroup (tp 1 without one).
RolloutLayout rollout_layout(const CommContext* comm);

// The rollout's data-parallel view of the pool: a TP group (consecutive ranks)
// is one dp rank, and only its tp rank 0 returns the rows.
runtime::MeshRank rollout_mesh_rank(const runtime::RoleContext& context, const RolloutLayout& layout);

// A generate or stream call's sampling and limits as the engine's sampling
// params for rollout dp rank `dp_rank`.
SamplingParams sampling_params(const Sampling& sampling, const TokenLimits& limits, int64_t dp_rank);

// generate's result: the rows in the engine layout, padded with `pad_token_id`,
// and the GenerateReply (the weight version, the engine's stats where it reports them).
Replied<GenerateReply> generation_result(const Batch& prompts, const GenerationOutput& generated,
                                         const SamplingParams& sampling, int64_t pad_token_id,
                                         const InferenceEngine& engine);

}  // namespace rlcore::workers
