// What both rollout roles share (see rollout_generation.h).
#include "workers/rollout_generation.h"

#include <vector>

#include "rlcore/capabilities.h"
#include "workers/sequences.h"

namespace rlcore::workers {

RolloutLayout rollout_layout(const CommContext* comm) {
  RolloutLayout layout;
  if (comm != nullptr && comm->has_group(kRolloutTpGroup)) {
    layout.tp_size = comm->group(kRolloutTpGroup).size();
    layout.tp_rank = comm->group(kRolloutTpGroup).rank();
  }
  return layout;
}

runtime::MeshRank rollout_mesh_rank(const runtime::RoleContext& context, const RolloutLayout& layout) {
  return runtime::MeshRank{context.rank / layout.tp_size, context.world_size / layout.tp_size, layout.tp_rank == 0};
}

SamplingParams sampling_params(const Sampling& sampling, const TokenLimits& limits, int64_t dp_rank) {
  SamplingParams params;
  params.n = 1;  // the controller repeats prompts n times, so every row is one sample
  params.max_tokens = limits.max_tokens;
  params.temperature = sampling.greedy ? 0.0 : sampling.temperature;
  params.top_k = sampling.top_k;
  params.top_p = sampling.top_p;
  // Every rollout dp rank samples its own rows: one seed per (call, dp rank),
  // the same on every rank of a TP group.
  params.seed = sampling.seed * 1009 + dp_rank;
  params.stop_token_ids = limits.stop_token_ids;
  return params;
}

Replied<GenerateReply> generation_result(const Batch& prompts, const GenerationOutput& generated,
                                         const SamplingParams& sampling, int64_t pad_token_id,
                                         const InferenceEngine& engine) {
  Replied<GenerateReply> out{make_sequence_batch(prompts, generated, sampling.max_tokens, pad_token_id),
                             GenerateReply{generated.weight_version, std::nullopt}};
  if (const auto* reports = capability<ReportsGenerationStats>(engine))
    out.value.stats = reports->last_generation_stats();
  return out;
}

}  // namespace rlcore::workers
