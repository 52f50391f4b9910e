// Cluster: the controller's side of a run's workers. Starts the control plane
// and the rendezvous store, launches (local) or awaits (external) the workers of
// every resource pool, and hands out one WorkerGroup per pool.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/core/runtime/control_server.h"
#include "rlcore/core/runtime/errors.h"
#include "rlcore/core/runtime/mesh.h"
#include "rlcore/core/runtime/worker_group.h"
#include "rlcore/export.h"

namespace rlcore::runtime {

// A role hosted by a pool: its name (prefix of its methods) and the registered
// role type that implements it.
struct RoleSpec {
  std::string name;
  std::string type;
  nlohmann::json options = nlohmann::json::object();
};

// A named set of worker processes; its roles are colocated in every one of them.
struct RLCORE_API PoolSpec {
  std::string name = "global";
  std::vector<int64_t> nodes = {1};  // workers on each node (verl: [n_gpus_per_node] * nnodes)
  std::vector<RoleSpec> roles;
  MeshShape mesh;                  // empty: {dp: size()}
  int64_t threads_per_worker = 0;  // 0: cores / workers on the host
  // A lost worker of this pool is replaced instead of ending the run
  // (async_training.on_rollout_failure: restart): the local launcher starts a
  // new one, an external launcher has ClusterOptions::rejoin_timeout to connect
  // one, and only the calls waiting on the lost worker fail (see
  // WorkerGroup::lost_ranks). Its workers get no process groups of their own
  // (a replacement could not join them), only shared ones (join_group).
  bool replaceable = false;

  int64_t size() const;
};

struct ClusterOptions {
  std::string launcher = "local";  // local: spawn the workers here; external: they connect themselves
  // The control plane's address. Workers connect to advertise_host (default:
  // bind_host, or this host's name when binding 0.0.0.0).
  std::string bind_host = "127.0.0.1";
  int port = 0;  // 0: any free port (local launcher only)
  std::string advertise_host;
  // "tcp", or "ipc" (a Unix socket under $TMPDIR; local launcher only).
  std::string transport = "tcp";
  // Empty: generated (local), or $RLCORE_SECRET (external; required there).
  std::string secret;
  std::string worker_executable;         // local: empty = see LocalLaunchOptions
  std::vector<std::string> worker_args;  // after `worker`, e.g. {"--log-level", "warn"}
  std::map<std::string, std::string> worker_env;
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::chrono::milliseconds connect_timeout{std::chrono::minutes(2)};
  std::chrono::milliseconds call_timeout{0};  // 0: none (heartbeats still catch dead workers)
  std::chrono::milliseconds shutdown_grace{5000};
  // How long a lost worker of a replaceable pool may take to be replaced (its
  // replacement connected and set up) before the run fails.
  std::chrono::milliseconds rejoin_timeout{std::chrono::minutes(2)};
  bool process_groups = true;
  std::chrono::milliseconds collective_timeout{std::chrono::minutes(30)};
  // The workers' device (trainer.device: auto, cpu, cuda): each worker resolves
  // it with its local rank and binds it before it creates its process groups.
  std::string device = "cpu";
  // The process groups' backend for CUDA tensors: nccl, or gloo (several ranks
  // sharing one GPU, which NCCL refuses).
  std::string device_backend = "nccl";
  std::vector<PoolSpec> pools;
};

class RLCORE_API Cluster {
 public:
  // Returns when every worker is connected and set up. Throws ConfigError for
  // bad options, WorkerLostError when a worker dies or fails setup (naming it),
  // TimeoutError when workers do not all arrive within connect_timeout.
  // Must run on a thread that outlives the workers (see LocalLauncher).
  explicit Cluster(ClusterOptions options);
  // shutdown()
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  WorkerGroup& group(const std::string& pool);
  std::vector<std::string> pools() const;
  std::string endpoint() const;  // what workers connect to
  // Every worker, by global rank.
  std::vector<WorkerAddress> workers() const;
  // Why the run cannot go on (the first worker lost), if it cannot.
  std::optional<std::string> failure() const;
  ControlServerStats stats() const;

  // Fails pending calls, asks every worker to stop, waits up to the shutdown
  // grace, then terminates local workers that remain. Idempotent.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlcore::runtime
