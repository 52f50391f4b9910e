// Starting the trainer's worker groups (see trainer_workers.h).
#include "trainer_workers.h"

#include <spdlog/spdlog.h>

#include "rlcore/core/runtime/runtime_config.h"
#include "rlcore/core/trainer/roles.h"
#include "rlcore/error.h"
#include "rlcore/inference_engine.h"

namespace rlcore::trainer {
namespace {

std::vector<RoleSpec> role_specs(bool critic) {
  std::vector<RoleSpec> roles = {RoleSpec{kActorRole, "actor_rollout_ref", nlohmann::json::object()}};
  if (critic) roles.push_back(RoleSpec{kCriticRole, "critic", nlohmann::json::object()});
  return roles;
}

const PoolSpec& pool_of(const std::vector<PoolSpec>& pools, const std::string& role) {
  for (const auto& pool : pools) {
    for (const auto& spec : pool.roles) {
      if (spec.name == role) return pool;
    }
  }
  throw ConfigError("no pool hosts the role '" + role + "'");
}

// A tensor-parallel rollout runs its collectives in kRolloutTpGroup, so the
// actor pool's mesh becomes {rollout_dp, rollout_tp}: TP groups of consecutive
// ranks. There is no "dp" dimension, so the train engines keep sharding over
// the whole pool (train-fsdp uses "dp" when present, else "world").
void add_rollout_mesh(PoolSpec& pool, const RunConfig& config) {
  const ConfigNode node = config.actor_rollout_ref.rollout.engine_options["tensor_model_parallel_size"];
  const int64_t tp = node.defined() ? node.as<int64_t>() : 1;
  if (tp <= 1) return;
  const std::string key = "actor_rollout_ref.rollout.tensor_model_parallel_size (" + std::to_string(tp) + ")";
  if (!pool.mesh.empty()) {
    for (const MeshDim& dim : pool.mesh) {
      if (dim.name == kRolloutTpGroup && dim.size == tp) return;
    }
    throw ConfigError(key + ": the mesh of pool '" + pool.name + "' needs a '" + kRolloutTpGroup +
                      "' dimension of that size (or leave its mesh unset)");
  }
  if (pool.size() % tp != 0) {
    throw ConfigError(key + " must divide the " + std::to_string(pool.size()) + " workers of pool '" + pool.name +
                      "', which hosts the rollout");
  }
  pool.mesh = {MeshDim{"rollout_dp", pool.size() / tp}, MeshDim{kRolloutTpGroup, tp}};
}

}  // namespace

std::pair<int64_t, int64_t> TrainerWorkers::pool_sizes(const RunConfig& config, bool critic) {
  const std::vector<PoolSpec> pools = resolve_pools(config.runtime, role_specs(critic));
  return {pool_of(pools, kActorRole).size(), critic ? pool_of(pools, kCriticRole).size() : 0};
}

TrainerWorkers::TrainerWorkers(const ResolvedConfig& resolved, const std::vector<std::string>& plugin_paths,
                               const WorkerRoles& roles) {
  nlohmann::json options = {{role_options::kConfig, resolved.tree.to_yaml()},
                            {role_options::kWithRef, roles.ref},
                            {role_options::kWithRollout, roles.rollout},
                            {role_options::kTotalSteps, roles.total_training_steps}};
  if (!roles.model_path.empty()) options[role_options::kModelPath] = roles.model_path;
  std::vector<PoolSpec> pools = resolve_pools(resolved.config.runtime, role_specs(roles.critic));
  for (auto& pool : pools) {
    for (auto& role : pool.roles) role.options = options;
    if (&pool == &pool_of(pools, kActorRole) && roles.rollout) add_rollout_mesh(pool, resolved.config);
  }
  ClusterOptions cluster = cluster_options(resolved.config.runtime, std::move(pools));
  for (const auto& path : plugin_paths) {
    cluster.worker_args.push_back("--plugins");
    cluster.worker_args.push_back(path);
  }
  cluster.worker_args.push_back("--log-level");
  cluster.worker_args.push_back(spdlog::get_level() <= spdlog::level::debug ? "debug" : "warn");
  cluster_ = std::make_unique<Cluster>(std::move(cluster));
  for (const auto& name : cluster_->pools()) {
    WorkerGroup& group = cluster_->group(name);
    for (const auto& [method, info] : group.methods()) {
      (void)info;
      if (method.rfind(std::string(kActorRole) + ".", 0) == 0) actor_ = &group;
      if (method.rfind(std::string(kCriticRole) + ".", 0) == 0) critic_ = &group;
    }
  }
  if (!actor_) throw Error("the workers registered no actor methods");
}

TrainerWorkers::~TrainerWorkers() { shutdown(); }

void TrainerWorkers::shutdown() {
  if (cluster_) cluster_->shutdown();
}

}  // namespace rlcore::trainer
