// The `runtime` config section: its schema, and its translation into the
// runtime's pools and ClusterOptions.
#include "rlcore/core/config/runtime_config.h"

#include <map>
#include <set>

#include "rlcore/error.h"
#include "rlcore/string_join.h"

namespace rlcore::config {

const OptionsSchema<RuntimeConfig>& runtime_config_schema() {
  static const OptionsSchema<RuntimeConfig> schema = [] {
    OptionsSchema<RuntimeConfig> s;
    s.key("launcher", &RuntimeConfig::launcher,
          "local: the controller starts the workers on this host; external: mpirun, srun or a script starts "
          "`rlcore worker` (see docs/launch.md).",
          one_of({"local", "external"}))
        .key("host", &RuntimeConfig::host, "Address the controller listens on (0.0.0.0 for every interface).")
        .key("port", &RuntimeConfig::port, "Control-plane port (0: any free port; fix it for external launchers).",
             in_range(0, 65535))
        .key("advertise_host", &RuntimeConfig::advertise_host,
             "Address workers connect to (empty: host, or this machine's name when host is 0.0.0.0).")
        .key("transport", &RuntimeConfig::transport, "Control plane: tcp, or ipc (a Unix socket; local launcher only).",
             one_of({"tcp", "ipc"}))
        .key("worker_executable", &RuntimeConfig::worker_executable,
             "rlcore binary the local launcher starts (empty: $RLCORE_EXECUTABLE, else this executable).")
        .key("heartbeat_interval_s", &RuntimeConfig::heartbeat_interval_s, "Seconds between heartbeats, both ways.",
             greater_than(0))
        .key("heartbeat_timeout_s", &RuntimeConfig::heartbeat_timeout_s,
             "A worker (or controller) silent this long is lost; the run stops.", greater_than(0))
        .key("connect_timeout_s", &RuntimeConfig::connect_timeout_s,
             "Seconds to wait for every worker to connect and set up.", greater_than(0))
        .key("call_timeout_s", &RuntimeConfig::call_timeout_s,
             "Deadline of one worker-group call (0: none; dead workers are still caught by heartbeats).", at_least(0))
        .key("shutdown_grace_s", &RuntimeConfig::shutdown_grace_s,
             "Seconds a worker may take to stop before it is killed.", at_least(0))
        .key("process_groups", &RuntimeConfig::process_groups,
             "Create c10d process groups for each pool and its mesh dimensions (gloo for host tensors, "
             "runtime.device_backend for CUDA tensors).")
        .key("collective_timeout_s", &RuntimeConfig::collective_timeout_s,
             "Timeout of the rendezvous and of each collective (NCCL's watchdog aborts a collective past it); "
             "the run's error then names the ranks that reached the collective and those that did not.",
             greater_than(0))
        .key("device_backend", &RuntimeConfig::device_backend,
             "Collectives on CUDA tensors: nccl, or gloo for several workers sharing one GPU (NCCL refuses that). "
             "Host tensors always use gloo (docs/gpu.md).",
             one_of({"nccl", "gloo"}))
        .key("threads_per_worker", &RuntimeConfig::threads_per_worker,
             "Intra-op CPU threads per worker (0: $OMP_NUM_THREADS when rlcore inherits it, else the cores rlcore may "
             "run on / workers on this host).",
             at_least(0))
        .key("nnodes", &RuntimeConfig::nnodes,
             "Nodes of the default pool 'global'; the same number as trainer.nnodes (verl's name): set either "
             "(docs/launch.md).",
             at_least(1))
        .key("n_workers_per_node", &RuntimeConfig::n_workers_per_node,
             "Workers per node of the default pool 'global'; the same number as trainer.n_gpus_per_node (verl's name): "
             "set either (docs/launch.md).",
             at_least(1))
        .subtree(
            "pools", &RuntimeConfig::pools,
            "Named resource pools: runtime.pools.<name>.{nodes, roles, mesh, threads_per_worker} (docs/launch.md).");
    return s;
  }();
  return schema;
}

const OptionsSchema<PoolConfig>& pool_config_schema() {
  static const OptionsSchema<PoolConfig> schema = [] {
    OptionsSchema<PoolConfig> s;
    s.key("nodes", &PoolConfig::nodes, "Workers on each node, e.g. [8, 8].")
        .key("roles", &PoolConfig::roles, "Roles colocated in this pool's workers (e.g. [actor, rollout, ref]).")
        .subtree("mesh", &PoolConfig::mesh, "Mesh dimensions in layout order, e.g. {pp: 1, dp: 2, tp: 2}.")
        .key("threads_per_worker", &PoolConfig::threads_per_worker, "Intra-op threads (0: runtime default).",
             at_least(0));
    return s;
  }();
  return schema;
}

namespace {

runtime::MeshShape parse_mesh(const ConfigNode& node) {
  runtime::MeshShape mesh;
  if (!node.defined() || node.is_null()) return mesh;
  for (const auto& name : node.keys()) {
    const int64_t size = node[name].as<int64_t>();
    if (size < 1) throw ConfigError("key " + node[name].describe() + " must be >= 1, got " + std::to_string(size));
    mesh.push_back(runtime::MeshDim{name, size});
  }
  return mesh;
}

}  // namespace

std::vector<runtime::PoolSpec> resolve_pools(const RuntimeConfig& config, const std::vector<runtime::RoleSpec>& roles) {
  std::map<std::string, runtime::RoleSpec> by_name;
  for (const auto& role : roles) by_name[role.name] = role;
  const std::string role_names = join(roles, ", ", [](const auto& role) { return role.name; });
  std::vector<runtime::PoolSpec> pools;
  std::set<std::string> placed;
  if (config.pools.defined() && !config.pools.is_null()) {
    for (const auto& name : config.pools.keys()) {
      const ConfigNode node = config.pools[name];
      if (name == "global") throw ConfigError("key " + node.describe() + ": 'global' is the default pool's name");
      const PoolConfig parsed = pool_config_schema().parse(node);
      runtime::PoolSpec pool;
      pool.name = name;
      pool.nodes = parsed.nodes;
      pool.threads_per_worker = parsed.threads_per_worker > 0 ? parsed.threads_per_worker : config.threads_per_worker;
      pool.mesh = parse_mesh(node["mesh"]);
      if (parsed.roles.empty()) throw ConfigError("key " + node.describe() + ": the pool lists no roles");
      for (const auto& role : parsed.roles) {
        auto it = by_name.find(role);
        if (it == by_name.end()) {
          throw ConfigError("key " + node["roles"].describe() + ": this run has no role '" + role +
                            "'; its roles: " + role_names);
        }
        if (!placed.insert(role).second) {
          throw ConfigError("key " + node["roles"].describe() + ": role '" + role + "' is already in another pool");
        }
        pool.roles.push_back(it->second);
      }
      try {
        runtime::validate_mesh(pool.mesh, pool.size());
      } catch (const ValueError& e) {
        throw ConfigError("key " + node.describe() + ": " + e.what());
      }
      pools.push_back(std::move(pool));
    }
  }
  runtime::PoolSpec global;
  global.nodes.assign(static_cast<std::size_t>(config.nnodes), config.n_workers_per_node);
  global.threads_per_worker = config.threads_per_worker;
  for (const auto& role : roles) {
    if (!placed.count(role.name)) global.roles.push_back(role);
  }
  if (!global.roles.empty()) pools.insert(pools.begin(), std::move(global));
  return pools;
}

runtime::ClusterOptions cluster_options(const RuntimeConfig& config, std::vector<runtime::PoolSpec> pools) {
  using std::chrono::milliseconds;
  auto ms = [](double seconds) { return milliseconds(static_cast<int64_t>(seconds * 1000)); };
  runtime::ClusterOptions options;
  options.launcher = config.launcher;
  options.bind_host = config.host;
  options.port = static_cast<int>(config.port);
  options.advertise_host = config.advertise_host;
  options.transport = config.transport;
  options.worker_executable = config.worker_executable;
  options.heartbeat_interval = ms(config.heartbeat_interval_s);
  options.heartbeat_timeout = ms(config.heartbeat_timeout_s);
  options.connect_timeout = ms(config.connect_timeout_s);
  options.call_timeout = ms(config.call_timeout_s);
  options.shutdown_grace = ms(config.shutdown_grace_s);
  options.process_groups = config.process_groups;
  options.collective_timeout = ms(config.collective_timeout_s);
  options.device_backend = config.device_backend;
  options.pools = std::move(pools);
  return options;
}

}  // namespace rlcore::config
