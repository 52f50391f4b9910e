// Private to the core: the actor pool's parallel layout. The parallel sizes the
// actor's train engine and the rollout's inference engine declare for their
// options (rlcore/parallel_sizes.h, through the registry) decide the pool's
// mesh, its data-parallel size and where each worker sits in it.
#pragma once

#include <cstdint>
#include <string>

#include "rlcore/comm_context.h"
#include "rlcore/registry.h"
#include "rlcore/core/runtime/dispatch.h"
#include "rlcore/core/runtime/mesh.h"
#include "rlcore/core/config/actor_rollout_ref_config.h"

namespace rlcore::workers {

// The sizes, and the config keys that set them (for the errors), e.g. train_tp from
// actor_rollout_ref.actor.megatron.tensor_model_parallel_size with train-megatron.
struct ActorParallelism {
  int64_t train_tp = 1;
  int64_t train_pp = 1;
  int64_t train_ep = 1;
  int64_t rollout_tp = 1;
  int64_t train_sp = 1;
  std::string train_tp_key = "actor_rollout_ref.actor's tp";
  std::string train_pp_key = "actor_rollout_ref.actor's pp";
  std::string train_ep_key = "actor_rollout_ref.actor's ep";
  std::string rollout_tp_key = "actor_rollout_ref.rollout's tp";
  std::string train_sp_key = "actor_rollout_ref.actor's sp";

  bool model_parallel() const { return train_tp * train_pp * train_ep > 1; }
};

// Asks the registry what the actor's train engine (config::actor_engine_options) and
// the rollout's inference engine declare; ConfigError for sizes below 1 or a
// sequence-parallel actor beside a model-parallel one or a TP rollout.
ActorParallelism actor_parallelism(const config::ActorRolloutRefConfig& config, const Registry& registry);

// The rollout's tensor-parallel size alone (its inference engine's declaration).
int64_t rollout_tensor_parallel_size(const config::ActorRolloutRefConfig& config, const Registry& registry);

// Data-parallel replicas of the trainer: pool size / (tp * pp * sp); ConfigError
// naming the keys when that does not divide.
int64_t actor_data_parallel_size(const ActorParallelism& parallel, int64_t workers);

// The actor pool's mesh (empty: the default one-dimensional mesh):
//   model-parallel trainer: {dp, pp, tp} (tp fastest: TP groups are consecutive
//     ranks); the rollout's TP must be 1 or the trainer's TP, and shares its group;
//     with expert parallelism dp is factored into {edp, ep} (Megatron-core's
//     expert-data-parallel and expert-parallel groups; ep = consecutive dp ranks);
//   sequence parallelism (Ulysses): {dp, sp} (sp fastest), the rollout's TP 1;
//   otherwise, a TP rollout: {rollout_dp, rollout_tp} (no "dp": train-fsdp keeps
//     sharding over the whole pool).
// ConfigError naming the keys for a layout the pool cannot hold.
runtime::MeshShape actor_pool_mesh(const ActorParallelism& parallel, int64_t workers);

// Where a worker sits in the trainer's data-parallel split: its "dp" group
// rank with a model- or sequence-parallel trainer (collect: tp and sp rank 0
// of pp stage 0; the engine returns the same outputs on every rank of a
// replica), else its pool rank.
runtime::MeshRank train_mesh_rank(const CommContext* comm, int64_t rank, int64_t world_size);

// The rollout's process groups: `comm` plus, when the trainer's "tp" group is
// also the rollout's TP group, that group under the name kRolloutTpGroup.
CommContext rollout_comm(const CommContext& comm, int64_t rollout_tp);

}  // namespace rlcore::workers
