// The actor pool's parallel layout (see trainer/parallel.h).
#include "workers/parallel.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "rlcore/error.h"
#include "rlcore/core/config/engine_options.h"
#include "rlcore/inference_engine.h"
#include "rlcore/train_engine.h"

namespace rlcore::workers {
namespace {

std::string layout_text(const ActorParallelism& p) {
  return p.train_tp_key + " = " + std::to_string(p.train_tp) + ", " + p.train_pp_key + " = " +
         std::to_string(p.train_pp);
}

// Sets `size` and `key` from an engine's declared size; the key, relative to the
// engine's options, is spelled from the config section the options came from.
void take(const ParallelSize& declared, const std::string& section, int64_t& size, std::string& key) {
  size = declared.size;
  if (!declared.key.empty()) key = section + "." + declared.key;
}

ParallelSizes rollout_sizes(const config::ActorRolloutRefConfig& config, const Registry& registry) {
  return registry.parallel_sizes(InferenceEngine::kKind, config.rollout.name, config.rollout.engine_options);
}

}  // namespace

ActorParallelism actor_parallelism(const config::ActorRolloutRefConfig& config, const Registry& registry) {
  ActorParallelism p;
  const std::string actor = "actor_rollout_ref.actor";
  const ParallelSizes train =
      registry.parallel_sizes(TrainEngine::kKind, config.actor.strategy, config::actor_engine_options(config));
  take(train.tp, actor, p.train_tp, p.train_tp_key);
  take(train.pp, actor, p.train_pp, p.train_pp_key);
  take(train.ep, actor, p.train_ep, p.train_ep_key);
  take(train.sp, actor, p.train_sp, p.train_sp_key);
  take(rollout_sizes(config, registry).tp, "actor_rollout_ref.rollout", p.rollout_tp, p.rollout_tp_key);
  if (p.train_tp < 1 || p.train_pp < 1 || p.train_ep < 1 || p.rollout_tp < 1 || p.train_sp < 1) {
    throw ConfigError(layout_text(p) + ", " + p.train_ep_key + " = " + std::to_string(p.train_ep) + ", " +
                      p.rollout_tp_key + " = " + std::to_string(p.rollout_tp) + ", " + p.train_sp_key + " = " +
                      std::to_string(p.train_sp) + ": parallel sizes must be >= 1");
  }
  if (p.train_sp > 1 && (p.model_parallel() || p.rollout_tp > 1)) {
    throw ConfigError(p.train_sp_key + " = " + std::to_string(p.train_sp) +
                      ": sequence parallelism is the fsdp engine's, with a rollout of " + p.rollout_tp_key +
                      " = 1; it does not combine with a model-parallel actor or a tensor-parallel rollout");
  }
  return p;
}

int64_t rollout_tensor_parallel_size(const config::ActorRolloutRefConfig& config, const Registry& registry) {
  return rollout_sizes(config, registry).tp.size;
}

int64_t actor_data_parallel_size(const ActorParallelism& p, int64_t workers) {
  if (p.train_sp > 1 && workers % p.train_sp != 0) {
    throw ConfigError(p.train_sp_key + " = " + std::to_string(p.train_sp) + " must divide the " +
                      std::to_string(workers) + " workers of the actor's pool");
  }
  const int64_t replica = p.train_tp * p.train_pp * p.train_sp;
  if (workers % replica != 0) {
    throw ConfigError(layout_text(p) + ": tp x pp = " + std::to_string(replica) + " must divide the " +
                      std::to_string(workers) + " workers of the actor's pool");
  }
  return workers / replica;
}

runtime::MeshShape actor_pool_mesh(const ActorParallelism& p, int64_t workers) {
  if (p.model_parallel()) {
    if (p.rollout_tp != 1 && p.rollout_tp != p.train_tp) {
      throw ConfigError(p.rollout_tp_key + " (" + std::to_string(p.rollout_tp) + ") must be 1 or " + p.train_tp_key +
                        " (" + std::to_string(p.train_tp) +
                        ") with a model-parallel actor: the rollout shares the trainer's TP groups");
    }
    runtime::MeshDim dp{"dp", actor_data_parallel_size(p, workers), {}};
    if (p.train_ep > 1) {
      if (dp.size % p.train_ep != 0) {
        throw ConfigError(p.train_ep_key + " = " + std::to_string(p.train_ep) +
                          " must divide the data-parallel size (" + std::to_string(dp.size) + " = " +
                          std::to_string(workers) + " workers / (tp x pp)): expert parallelism splits the dp ranks");
      }
      dp.factors = {runtime::MeshDim{"edp", dp.size / p.train_ep, {}}, runtime::MeshDim{"ep", p.train_ep, {}}};
    }
    return {dp, runtime::MeshDim{"pp", p.train_pp, {}}, runtime::MeshDim{"tp", p.train_tp, {}}};
  }
  if (p.train_sp > 1)
    return {runtime::MeshDim{"dp", actor_data_parallel_size(p, workers), {}}, runtime::MeshDim{"sp", p.train_sp, {}}};
  if (p.rollout_tp <= 1) return {};
  if (workers % p.rollout_tp != 0) {
    throw ConfigError(p.rollout_tp_key + " (" + std::to_string(p.rollout_tp) + ") must divide the " +
                      std::to_string(workers) + " workers of the actor's pool, which hosts the rollout");
  }
  return {runtime::MeshDim{"rollout_dp", workers / p.rollout_tp}, runtime::MeshDim{kRolloutTpGroup, p.rollout_tp}};
}

runtime::MeshRank train_mesh_rank(const CommContext* comm, int64_t rank, int64_t world_size) {
  if (comm == nullptr || !(comm->has_group("tp") || comm->has_group("pp") || comm->has_group("sp")))
    return runtime::MeshRank{rank, world_size, true};
  const auto group_rank = [&](const char* name) { return comm->has_group(name) ? comm->group(name).rank() : 0; };
  const int64_t dp_size = comm->has_group("dp") ? comm->group("dp").size() : 1;
  return runtime::MeshRank{group_rank("dp"), dp_size,
                           group_rank("tp") == 0 && group_rank("pp") == 0 && group_rank("sp") == 0};
}

CommContext rollout_comm(const CommContext& comm, int64_t rollout_tp) {
  std::vector<CommGroup> groups;
  for (const std::string& name : comm.group_names()) groups.push_back(comm.group(name));
  if (rollout_tp > 1 && !comm.has_group(kRolloutTpGroup) && comm.has_group("tp")) {
    groups.push_back(comm.group("tp").renamed(kRolloutTpGroup));
  }
  return CommContext(comm.rank(), comm.world_size(), comm.local_rank(), comm.mesh(), std::move(groups));
}

}  // namespace rlcore::workers
