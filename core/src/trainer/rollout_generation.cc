// What both rollout roles share (see rollout_generation.h).
#include "trainer/rollout_generation.h"

#include <vector>

#include "rlcore/capabilities.h"
#include "trainer/sequences.h"
#include "trainer/worker_contract.h"

namespace rlcore::trainer {

RolloutLayout rollout_layout(const CommContext* comm) {
  RolloutLayout layout;
  if (comm != nullptr && comm->has_group(kRolloutTpGroup)) {
    layout.tp_size = comm->group(kRolloutTpGroup).size();
    layout.tp_rank = comm->group(kRolloutTpGroup).rank();
  }
  return layout;
}

MeshRank rollout_mesh_rank(const RoleContext& context, const RolloutLayout& layout) {
  return MeshRank{context.rank / layout.tp_size, context.world_size / layout.tp_size, layout.tp_rank == 0};
}

SamplingParams sampling_from_args(const nlohmann::json& arguments, int64_t dp_rank) {
  SamplingParams sampling;
  sampling.n = 1;  // the controller repeats prompts n times, so every row is one sample
  sampling.max_tokens = arguments.at(args::kMaxTokens).get<int64_t>();
  sampling.temperature = arguments.value(args::kGreedy, false) ? 0.0 : arguments.value(args::kTemperature, 1.0);
  sampling.top_k = arguments.value(args::kTopK, int64_t{-1});
  sampling.top_p = arguments.value(args::kTopP, 1.0);
  // Every rollout dp rank samples its own rows: one seed per (call, dp rank),
  // the same on every rank of a TP group.
  sampling.seed = arguments.value(args::kSeed, int64_t{0}) * 1009 + dp_rank;
  sampling.stop_token_ids = arguments.value(args::kStopTokenIds, std::vector<int32_t>{});
  return sampling;
}

MethodResult generation_result(const Batch& prompts, const GenerationOutput& generated, const SamplingParams& sampling,
                               const nlohmann::json& arguments, const InferenceEngine& engine) {
  const int64_t pad_id = arguments.at(args::kPadTokenId).get<int64_t>();
  Batch out = make_sequence_batch(prompts, generated, sampling.max_tokens, pad_id);
  GenerateReply reply{generated.weight_version, std::nullopt};
  if (const auto* reports = capability<ReportsGenerationStats>(engine)) reply.stats = reports->last_generation_stats();
  return MethodResult{out, reply.to_json()};
}

}  // namespace rlcore::trainer
