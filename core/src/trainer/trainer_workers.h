// Private to the core: the worker groups a trainer drives (the actor's, and
// the critic's and the reward model's when there are), started from the run config's pools.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rlcore/core/config/run_config.h"
#include "rlcore/registry.h"
#include "rlcore/core/runtime/cluster.h"
#include "workers/worker_contract.h"

namespace rlcore::trainer {

struct WorkerRoles {
  bool critic = false;
  bool ref = false;
  bool rollout = true;              // the actor's colocated rollout
  bool standalone_rollout = false;  // a rollout pool of its own (async_training.mode; rollout must be false)
  int64_t total_training_steps = 0;
  std::string model_path;  // empty: actor_rollout_ref.model.path
};

class TrainerWorkers {
 public:
  // How many ways the config splits each role's rows, without starting
  // anything: {actor data-parallel size (its workers / (tp x pp)), critic
  // workers (0 without a critic)}; the engines' parallel sizes come from `components`.
  static std::pair<int64_t, int64_t> data_parallel_sizes(const config::RunConfig& config, const Registry& components,
                                                         bool critic);

  // The pools of a run: runtime.pools and "global" (config::resolve_pools), plus, with
  // a standalone rollout that no runtime pool hosts, the pool "rollout" of
  // rollout.n_gpus_per_node x rollout.nnodes workers.
  static std::vector<runtime::PoolSpec> pools(const config::RunConfig& config, bool critic, bool standalone_rollout);

  // Starts the workers (local launcher) or waits for them (external).
  TrainerWorkers(const config::ResolvedConfig& resolved, const Registry& components,
                 const std::vector<std::string>& plugin_paths, const WorkerRoles& roles);
  ~TrainerWorkers();

  runtime::WorkerGroup& actor() { return *actor_; }
  runtime::WorkerGroup* critic() { return critic_; }              // null without a critic
  runtime::WorkerGroup* reward_model() { return reward_model_; }  // null without reward.reward_model.enable
  runtime::WorkerGroup* rollout() { return rollout_; }            // null without a standalone rollout pool
  void shutdown();

 private:
  std::unique_ptr<runtime::Cluster> cluster_;
  runtime::WorkerGroup* actor_ = nullptr;
  runtime::WorkerGroup* critic_ = nullptr;
  runtime::WorkerGroup* reward_model_ = nullptr;
  runtime::WorkerGroup* rollout_ = nullptr;
};

}  // namespace rlcore::trainer
