// Starting the trainer's worker groups (see trainer/workers.h).
#include "trainer/trainer_workers.h"

#include <algorithm>
#include <map>

#include <spdlog/spdlog.h>

#include "rlcore/core/config/runtime_config.h"
#include "rlcore/device.h"
#include "rlcore/core/workers/roles.h"
#include "rlcore/error.h"
#include "rlcore/string_join.h"
#include "rlcore/inference_engine.h"
#include "workers/parallel.h"

namespace rlcore::trainer {
namespace {

std::vector<runtime::RoleSpec> role_specs(const config::RunConfig& config, bool critic, bool standalone_rollout) {
  std::vector<runtime::RoleSpec> roles = {
      runtime::RoleSpec{workers::kActorRole, workers::role_types::kActor, nlohmann::json::object()}};
  if (critic)
    roles.push_back(runtime::RoleSpec{workers::kCriticRole, workers::role_types::kCritic, nlohmann::json::object()});
  if (config.reward.reward_model.enable) {
    roles.push_back(
        runtime::RoleSpec{workers::kRewardModelRole, workers::role_types::kRewardModel, nlohmann::json::object()});
  }
  if (standalone_rollout)
    roles.push_back(runtime::RoleSpec{workers::kRolloutRole, workers::role_types::kRollout, nlohmann::json::object()});
  return roles;
}

const runtime::PoolSpec& pool_of(const std::vector<runtime::PoolSpec>& pools, const std::string& role) {
  for (const auto& pool : pools) {
    for (const auto& spec : pool.roles) {
      if (spec.name == role) return pool;
    }
  }
  throw ConfigError("no pool hosts the role '" + role + "'");
}

// The mesh the actor's layout needs (trainer/parallel.h); a mesh written in the
// config is kept when it has the dimensions that layout needs.
void set_actor_mesh(runtime::PoolSpec& pool, const config::RunConfig& config, const Registry& components,
                    bool rollout) {
  workers::ActorParallelism parallel = workers::actor_parallelism(config.actor_rollout_ref, components);
  if (!rollout) parallel.rollout_tp = 1;
  const runtime::MeshShape wanted = workers::actor_pool_mesh(parallel, pool.size());
  if (wanted.empty()) return;
  if (pool.mesh.empty()) {
    pool.mesh = wanted;
    return;
  }
  for (const runtime::MeshDim& need : wanted) {
    if (need.name.rfind("dp") != std::string::npos) continue;  // dp / rollout_dp follow from the rest
    bool found = false;
    for (const runtime::MeshDim& dim : pool.mesh) found = found || (dim.name == need.name && dim.size == need.size);
    if (!found) {
      throw ConfigError("the mesh of pool '" + pool.name + "' needs a '" + need.name + "' dimension of size " +
                        std::to_string(need.size) + " for the actor's parallel layout (or leave its mesh unset)");
    }
  }
}

// A standalone rollout pool's mesh: {rollout_dp, rollout_tp} for a TP rollout.
void set_rollout_mesh(runtime::PoolSpec& pool, const config::RunConfig& config, const Registry& components) {
  workers::ActorParallelism parallel;
  parallel.rollout_tp = workers::actor_parallelism(config.actor_rollout_ref, components).rollout_tp;
  if (pool.mesh.empty()) pool.mesh = workers::actor_pool_mesh(parallel, pool.size());
}

// async_training.on_rollout_failure restart: the rollout pool's workers are
// replaced one by one, so each must stand alone (no TP group, no other role).
void make_rollout_pool_replaceable(runtime::PoolSpec& pool, const config::RunConfig& config,
                                   const Registry& components) {
  const int64_t tp = workers::actor_parallelism(config.actor_rollout_ref, components).rollout_tp;
  if (tp != 1) {
    throw ConfigError(
        "async_training.on_rollout_failure: restart replaces one rollout worker at a time, which a "
        "tensor-parallel group cannot survive; actor_rollout_ref.rollout.tensor_model_parallel_size is " +
        std::to_string(tp) + " (set it to 1, or on_rollout_failure: fail)");
  }
  if (pool.roles.size() != 1) {
    throw ConfigError("async_training.on_rollout_failure: restart needs the rollout role alone in its pool; pool '" +
                      pool.name + "' hosts " +
                      join(pool.roles, ", ", [](const runtime::RoleSpec& role) { return role.name; }));
  }
  pool.replaceable = true;
}

// Before the local launcher starts anything: one GPU per worker it would
// start on this host (external launchers place workers on other hosts, which
// each worker checks for itself).
void check_local_devices(const config::RunConfig& config, const std::vector<runtime::PoolSpec>& pools) {
  if (config.runtime.launcher != "local") return;
  int64_t workers = 0;
  for (const runtime::PoolSpec& pool : pools) workers += pool.size();
  const std::string sizes = pools.size() == 1 ? "trainer.n_gpus_per_node x trainer.nnodes"
                                              : "trainer.n_gpus_per_node x trainer.nnodes plus runtime.pools";
  check_device_slots(config.trainer.device, workers, "trainer.device", sizes);
}

}  // namespace

std::vector<runtime::PoolSpec> TrainerWorkers::pools(const config::RunConfig& config, bool critic,
                                                     bool standalone_rollout) {
  std::vector<runtime::PoolSpec> pools =
      config::resolve_pools(config.runtime, role_specs(config, critic, standalone_rollout));
  if (!standalone_rollout || pools.front().name != "global") return pools;
  std::vector<runtime::RoleSpec>& global = pools.front().roles;
  const auto rollout = std::find_if(global.begin(), global.end(),
                                    [](const runtime::RoleSpec& r) { return r.name == workers::kRolloutRole; });
  if (rollout == global.end()) return pools;  // a runtime pool hosts it
  runtime::PoolSpec pool;
  pool.name = workers::kRolloutRole;
  pool.nodes.assign(static_cast<std::size_t>(config.rollout.nnodes), config.rollout.n_gpus_per_node);
  pool.threads_per_worker = config.runtime.threads_per_worker;
  pool.roles.push_back(*rollout);
  global.erase(rollout);
  pools.push_back(std::move(pool));
  return pools;
}

std::pair<int64_t, int64_t> TrainerWorkers::data_parallel_sizes(const config::RunConfig& config,
                                                                const Registry& components, bool critic) {
  const std::vector<runtime::PoolSpec> pools = TrainerWorkers::pools(config, critic, false);
  const int64_t actor_dp = workers::actor_data_parallel_size(
      workers::actor_parallelism(config.actor_rollout_ref, components), pool_of(pools, workers::kActorRole).size());
  return {actor_dp, critic ? pool_of(pools, workers::kCriticRole).size() : 0};
}

TrainerWorkers::TrainerWorkers(const config::ResolvedConfig& resolved, const Registry& components,
                               const std::vector<std::string>& plugin_paths, const WorkerRoles& roles) {
  nlohmann::json options = {{workers::role_options::kConfig, resolved.tree.to_yaml()},
                            {workers::role_options::kWithRef, roles.ref},
                            {workers::role_options::kWithRollout, roles.rollout},
                            {workers::role_options::kTotalSteps, roles.total_training_steps}};
  if (!roles.model_path.empty()) options[workers::role_options::kModelPath] = roles.model_path;
  std::vector<runtime::PoolSpec> pools = TrainerWorkers::pools(resolved.config, roles.critic, roles.standalone_rollout);
  for (auto& pool : pools) {
    for (auto& role : pool.roles) role.options = options;
    if (&pool == &pool_of(pools, workers::kActorRole)) set_actor_mesh(pool, resolved.config, components, roles.rollout);
    if (roles.standalone_rollout && &pool == &pool_of(pools, workers::kRolloutRole)) {
      set_rollout_mesh(pool, resolved.config, components);
      if (resolved.config.async_training.on_rollout_failure == "restart")
        make_rollout_pool_replaceable(pool, resolved.config, components);
    }
  }
  check_local_devices(resolved.config, pools);
  std::map<std::string, std::string> pool_of_role;
  for (const auto& pool : pools) {
    for (const auto& spec : pool.roles) pool_of_role[spec.name] = pool.name;
  }
  runtime::ClusterOptions cluster = config::cluster_options(resolved.config.runtime, std::move(pools));
  cluster.device = resolved.config.trainer.device;
  cluster.rejoin_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(resolved.config.async_training.rejoin_timeout_s * 1000));
  for (const auto& path : plugin_paths) {
    cluster.worker_args.push_back("--plugins");
    cluster.worker_args.push_back(path);
  }
  cluster.worker_args.push_back("--log-level");
  cluster.worker_args.push_back(spdlog::get_level() <= spdlog::level::debug ? "debug" : "warn");
  cluster_ = std::make_unique<runtime::Cluster>(std::move(cluster));
  const auto group_of = [&](const char* role) -> runtime::WorkerGroup* {
    const auto pool = pool_of_role.find(role);
    return pool == pool_of_role.end() ? nullptr : &cluster_->group(pool->second);
  };
  actor_ = group_of(workers::kActorRole);
  critic_ = group_of(workers::kCriticRole);
  reward_model_ = group_of(workers::kRewardModelRole);
  rollout_ = group_of(workers::kRolloutRole);
  if (!actor_) throw Error("the workers registered no actor methods");
  if (roles.standalone_rollout && !rollout_) throw Error("the workers registered no rollout methods");
  if (resolved.config.reward.reward_model.enable && !reward_model_) {
    throw Error("the workers registered no reward_model methods (reward.reward_model.enable is true)");
  }
}

TrainerWorkers::~TrainerWorkers() { shutdown(); }

void TrainerWorkers::shutdown() {
  if (cluster_) cluster_->shutdown();
}

}  // namespace rlcore::trainer
