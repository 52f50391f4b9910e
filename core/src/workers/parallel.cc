// The actor pool's parallel layout (see trainer/parallel.h).
#include "workers/parallel.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "rlcore/error.h"
#include "rlcore/inference_engine.h"

namespace rlcore::workers {
namespace {

int64_t option_or(const ConfigNode& node, int64_t fallback) { return node.defined() ? node.as<int64_t>() : fallback; }

const char* kTrainTpKey = "actor_rollout_ref.actor.megatron.tensor_model_parallel_size";
const char* kTrainPpKey = "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size";
const char* kTrainEpKey = "actor_rollout_ref.actor.megatron.expert_model_parallel_size";
const char* kRolloutTpKey = "actor_rollout_ref.rollout.tensor_model_parallel_size";
const char* kTrainSpKey = "actor_rollout_ref.actor.ulysses_sequence_parallel_size";

std::string layout_text(const ActorParallelism& p) {
  return std::string(kTrainTpKey) + " = " + std::to_string(p.train_tp) + ", " + kTrainPpKey + " = " +
         std::to_string(p.train_pp);
}

}  // namespace

ActorParallelism actor_parallelism(const config::ActorRolloutRefConfig& config) {
  ActorParallelism p;
  const ConfigNode megatron = config.actor.engine_options["megatron"];
  if (megatron.defined()) {
    p.train_tp = option_or(megatron["tensor_model_parallel_size"], 1);
    p.train_pp = option_or(megatron["pipeline_model_parallel_size"], 1);
    p.train_ep = option_or(megatron["expert_model_parallel_size"], 1);
  }
  p.rollout_tp = option_or(config.rollout.engine_options["tensor_model_parallel_size"], 1);
  p.train_sp = option_or(config.actor.engine_options["ulysses_sequence_parallel_size"], 1);
  if (p.train_tp < 1 || p.train_pp < 1 || p.train_ep < 1 || p.rollout_tp < 1 || p.train_sp < 1) {
    throw ConfigError(layout_text(p) + ", " + kTrainEpKey + " = " + std::to_string(p.train_ep) + ", " + kRolloutTpKey +
                      " = " + std::to_string(p.rollout_tp) + ", " + kTrainSpKey + " = " + std::to_string(p.train_sp) +
                      ": parallel sizes must be >= 1");
  }
  if (p.train_sp > 1 && (p.model_parallel() || p.rollout_tp > 1)) {
    throw ConfigError(std::string(kTrainSpKey) + " = " + std::to_string(p.train_sp) +
                      ": sequence parallelism is the fsdp engine's, with a rollout of " + kRolloutTpKey +
                      " = 1; it does not combine with a model-parallel actor or a tensor-parallel rollout");
  }
  return p;
}

int64_t actor_data_parallel_size(const ActorParallelism& p, int64_t workers) {
  if (p.train_sp > 1 && workers % p.train_sp != 0) {
    throw ConfigError(std::string(kTrainSpKey) + " = " + std::to_string(p.train_sp) + " must divide the " +
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
      throw ConfigError(std::string(kRolloutTpKey) + " (" + std::to_string(p.rollout_tp) + ") must be 1 or " +
                        kTrainTpKey + " (" + std::to_string(p.train_tp) +
                        ") with a model-parallel actor: the rollout shares the trainer's TP groups");
    }
    runtime::MeshDim dp{"dp", actor_data_parallel_size(p, workers), {}};
    if (p.train_ep > 1) {
      if (dp.size % p.train_ep != 0) {
        throw ConfigError(std::string(kTrainEpKey) + " = " + std::to_string(p.train_ep) +
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
    throw ConfigError(std::string(kRolloutTpKey) + " (" + std::to_string(p.rollout_tp) + ") must divide the " +
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
