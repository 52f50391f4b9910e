// The `runtime` config section: launcher, control-plane address and deadlines,
// and resource pools (which roles share which worker processes).
//
//   runtime:
//     launcher: local
//     nnodes: 1                 # the default pool "global": [n_workers_per_node] * nnodes
//     n_workers_per_node: 4
//     pools:                    # optional named pools; roles they list leave "global"
//       rollout_pool: {nodes: [2], roles: [rollout], mesh: {dp: 1, tp: 2}}
#pragma once

#include <string>
#include <vector>

#include "rlcore/config_node.h"
#include "rlcore/core/runtime/cluster.h"
#include "rlcore/export.h"
#include "rlcore/options.h"

namespace rlcore::config {

struct RuntimeConfig {
  std::string launcher = "local";
  std::string host = "127.0.0.1";
  int64_t port = 0;
  std::string advertise_host;
  std::string transport = "tcp";
  std::string worker_executable;
  double heartbeat_interval_s = 1.0;
  double heartbeat_timeout_s = 10.0;
  double connect_timeout_s = 120.0;
  double call_timeout_s = 0.0;
  double shutdown_grace_s = 5.0;
  bool process_groups = true;
  double collective_timeout_s = 1800.0;
  std::string device_backend = "nccl";
  int64_t threads_per_worker = 0;
  int64_t nnodes = 1;
  int64_t n_workers_per_node = 1;
  ConfigNode pools;
};

// One entry of runtime.pools.
struct PoolConfig {
  std::vector<int64_t> nodes = {1};
  std::vector<std::string> roles;
  ConfigNode mesh;
  int64_t threads_per_worker = 0;
};

RLCORE_API const OptionsSchema<RuntimeConfig>& runtime_config_schema();
RLCORE_API const OptionsSchema<PoolConfig>& pool_config_schema();

// The pools of a run that uses `roles`: each pool in runtime.pools hosts the
// roles it lists; every other role goes to the pool "global" of
// [n_workers_per_node] * nnodes workers. Throws ConfigError naming the key.
RLCORE_API std::vector<runtime::PoolSpec> resolve_pools(const RuntimeConfig& config,
                                                        const std::vector<runtime::RoleSpec>& roles);

// Cluster options from the config (the secret comes from RLCORE_SECRET for the
// external launcher, and is generated for the local one).
RLCORE_API runtime::ClusterOptions cluster_options(const RuntimeConfig& config, std::vector<runtime::PoolSpec> pools);

}  // namespace rlcore::config
