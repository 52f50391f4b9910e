// Cluster: startup (server, store, launcher, waiting for every worker to be
// ready), liveness while running (launcher exits, lost workers) and shutdown.
#include "rlcore/core/runtime/cluster.h"

#include <unistd.h>

#include <cstdlib>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "rlcore/core/runtime/local_launcher.h"
#include "rlcore/core/runtime/process_groups.h"
#include "rlcore/core/runtime/secret.h"
#include "rlcore/error.h"
#include "rlcore/string_join.h"
#include "runtime/cluster_state.h"

namespace rlcore::runtime {

using detail::ClusterState;

int64_t PoolSpec::size() const {
  int64_t total = 0;
  for (int64_t n : nodes) total += n;
  return total;
}

namespace {

std::string hostname() {
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? name : "localhost";
}

void validate(const ClusterOptions& options) {
  if (options.launcher != "local" && options.launcher != "external") {
    throw ConfigError("unknown launcher '" + options.launcher + "'; launchers: local, external");
  }
  if (options.pools.empty()) throw ConfigError("a cluster needs at least one resource pool");
  std::set<std::string> pools, roles;
  for (const auto& pool : options.pools) {
    if (!pools.insert(pool.name).second) throw ConfigError("resource pool '" + pool.name + "' is declared twice");
    if (pool.nodes.empty()) throw ConfigError("resource pool '" + pool.name + "' has no nodes");
    for (int64_t n : pool.nodes) {
      if (n < 1)
        throw ConfigError("resource pool '" + pool.name + "' has a node with " + std::to_string(n) + " workers");
    }
    if (options.launcher == "local" && pool.nodes.size() != 1) {
      throw ConfigError("resource pool '" + pool.name + "' spans " + std::to_string(pool.nodes.size()) +
                        " nodes; the local launcher starts workers on this host only (use an external launcher)");
    }
    for (const auto& role : pool.roles) {
      if (!roles.insert(role.name).second) throw ConfigError("role '" + role.name + "' is mapped to two pools");
    }
    try {
      validate_mesh(pool.mesh, pool.size());
    } catch (const ValueError& e) {
      throw ConfigError("resource pool '" + pool.name + "': " + e.what());
    }
  }
  if (options.transport != "tcp" && options.transport != "ipc") {
    throw ConfigError("unknown transport '" + options.transport + "'; transports: tcp, ipc");
  }
  if (options.transport == "ipc" && options.launcher != "local") {
    throw ConfigError("the ipc transport reaches workers on this host only; use tcp with an external launcher");
  }
  if (options.heartbeat_timeout <= options.heartbeat_interval) {
    throw ConfigError("the heartbeat timeout must be longer than the heartbeat interval");
  }
}

MeshRank mesh_rank_from_json(const nlohmann::json& json) {
  return MeshRank{json.at("dp_rank").get<int64_t>(), json.at("dp_size").get<int64_t>(), json.at("collect").get<bool>()};
}

}  // namespace

struct Cluster::Impl {
  ClusterOptions options;
  std::shared_ptr<ClusterState> state = std::make_shared<ClusterState>();
  std::vector<int64_t> first_rank;  // per pool
  int64_t world_size = 0;
  std::string advertise_host;
  std::string endpoint;
  std::unique_ptr<ControlServer> server;
  std::unique_ptr<RendezvousStore> store;
  std::mutex launcher_mutex;
  std::unique_ptr<LocalLauncher> launcher;
  std::map<std::string, std::unique_ptr<WorkerGroup>> groups;
  bool shut = false;

  std::size_t pool_of(int64_t global_rank) const {
    std::size_t pool = 0;
    while (pool + 1 < first_rank.size() && global_rank >= first_rank[pool + 1]) ++pool;
    return pool;
  }

  nlohmann::json setup_for(int64_t global_rank) const {
    const std::size_t index = pool_of(global_rank);
    const PoolSpec& pool = options.pools[index];
    nlohmann::json setup;
    setup["pool"] = pool.name;
    setup["pool_rank"] = global_rank - first_rank[index];
    setup["pool_size"] = pool.size();
    setup["global_rank"] = global_rank;
    setup["mesh"] = mesh_to_json(mesh_or_default(pool.mesh, pool.size()));
    setup["threads"] =
        options.launcher == "local" ? threads_for_worker(pool.threads_per_worker, world_size) : pool.threads_per_worker;
    setup["roles"] = nlohmann::json::array();
    for (const auto& role : pool.roles) {
      setup["roles"].push_back({{"name", role.name}, {"type", role.type}, {"options", role.options}});
    }
    setup["device"] = options.device;
    setup["store"] = nullptr;
    if (store) {
      setup["store"] = {{"prefix", "rlcore/" + pool.name},
                        {"timeout_ms", options.collective_timeout.count()},
                        {"device_backend", options.device_backend}};
      // A replacement could not join the pool's groups once its peers are past them.
      if (pool.replaceable) setup["store"]["pool_groups"] = false;
      if (store->file().empty()) {
        setup["store"]["host"] = advertise_host;
        setup["store"]["port"] = store->port();
      } else {
        setup["store"]["file"] = store->file();
      }
    }
    return setup;
  }

  nlohmann::json on_hello(const PeerInfo& peer) {
    if (peer.world_size != world_size || peer.rank >= world_size) {
      throw ConfigError("worker says rank " + std::to_string(peer.rank) +
                        " of WORLD_SIZE=" + std::to_string(peer.world_size) + ", but this run has " +
                        std::to_string(world_size) + " workers");
    }
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      if (state->closing) throw Error("the run is shutting down");
      if (state->peers.count(peer.rank) && !state->lost.count(peer.rank)) {
        throw ConfigError("rank " + std::to_string(peer.rank) +
                          " already joined this run; a run re-admits only the replacement of a lost worker of a "
                          "replaceable pool (async_training.on_rollout_failure: restart)");
      }
      if (state->peers.count(peer.rank)) {
        spdlog::info("controller: the replacement of worker rank {} connected (host {}, pid {})", peer.rank, peer.host,
                     peer.pid);
      }
      state->peers[peer.rank] = peer;
      state->changed.notify_all();
    }
    return setup_for(peer.rank);
  }

  void on_message(const PeerInfo& peer, Envelope message) {
    const std::string& type = message.type();
    if (type == "reply") {
      state->on_reply(peer, std::move(message));
    } else if (type == "probe_reply") {
      state->on_probe_reply(peer, message.header);
    } else if (type == "ready") {
      if (!message.header["ok"].get<bool>()) {
        const WorkerAddress worker{peer.rank, peer.host, peer.pid};
        state->fail(worker,
                    "worker " + worker.describe() + " failed to set up: " + message.header["error"].get<std::string>());
        return;
      }
      std::lock_guard<std::mutex> lock(state->mutex);
      state->ready[peer.rank] = message.header;
      if (state->lost.erase(peer.rank)) {
        spdlog::warn("controller: worker rank {}{} replaced: pid {} on {} is set up", peer.rank,
                     pool_rank_text(peer.rank), peer.pid, peer.host);
      }
      state->changed.notify_all();
    } else if (type == "bye") {
      server->forget(peer.rank);
      bool closing = false;
      {
        std::lock_guard<std::mutex> lock(state->mutex);
        closing = state->closing;
      }
      if (!closing) on_lost(peer, "it stopped before the controller asked it to");
    }
  }

  // " of pool 'rollout', its rank 1" when the run has several pools.
  std::string pool_rank_text(int64_t global_rank) const {
    if (options.pools.size() <= 1 || global_rank < 0) return "";
    const std::size_t index = pool_of(global_rank);
    return " of pool '" + options.pools[index].name + "', its rank " + std::to_string(global_rank - first_rank[index]);
  }

  // A lost worker of a replaceable pool: the run goes on without it while a replacement comes up.
  void replace(const WorkerAddress& worker, const std::string& message) {
    if (!state->lose(worker, message)) return;
    std::lock_guard<std::mutex> lock(launcher_mutex);
    if (!launcher) {
      spdlog::warn("{}; waiting up to {} s for its replacement to connect (async_training.on_rollout_failure: restart)",
                   message, std::chrono::duration_cast<std::chrono::seconds>(options.rejoin_timeout).count());
      return;
    }
    spdlog::warn("{}; starting a replacement (async_training.on_rollout_failure: restart)", message);
    try {
      launcher->restart(worker.rank);
    } catch (const std::exception& e) {
      state->fail(worker, message + "; its replacement could not be started: " + e.what());
    }
  }

  void on_lost(const PeerInfo& peer, const std::string& reason) {
    bool replaceable = false;
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      if (state->closing) return;
      replaceable = state->replaceable.count(peer.rank) > 0;
    }
    if (replaceable) {
      const WorkerAddress worker{peer.rank, peer.host, peer.pid};
      replace(worker, "worker " + worker.describe() + pool_rank_text(peer.rank) + " was lost: " + reason);
      return;
    }
    {
      // A hung worker is ended now: its peers, waiting on it in a collective,
      // then fail at once instead of after the shutdown grace. Before the
      // failure is raised, which lets the main thread take the launcher away.
      std::lock_guard<std::mutex> lock(launcher_mutex);
      if (launcher) launcher->kill(peer.rank);
    }
    const WorkerAddress worker{peer.rank, peer.host, peer.pid};
    // With several pools, which one lost it ("rank 0 ... of pool 'rollout'").
    state->fail(worker, "worker " + worker.describe() + pool_rank_text(peer.rank) + " was lost: " + reason);
  }

  void on_tick() {
    std::vector<ExitedWorker> exited;
    {
      std::lock_guard<std::mutex> lock(launcher_mutex);
      if (launcher) exited = launcher->poll();
    }
    for (const auto& gone : exited) {
      {
        std::lock_guard<std::mutex> lock(state->mutex);
        if (state->closing) continue;
      }
      const std::string reason = "its process (pid " + std::to_string(gone.pid) + ") " + gone.status;
      if (server->connected(gone.rank)) {
        server->declare_lost(gone.rank, reason);
      } else {
        PeerInfo peer;
        {
          std::lock_guard<std::mutex> lock(state->mutex);
          auto it = state->peers.find(gone.rank);
          peer =
              it != state->peers.end() ? it->second : PeerInfo{gone.rank, world_size, gone.rank, hostname(), gone.pid};
        }
        on_lost(peer, reason);
      }
    }
    state->expire_calls();
  }

  void start() {
    validate(options);
    for (const auto& pool : options.pools) {
      first_rank.push_back(world_size);
      world_size += pool.size();
    }
    for (std::size_t i = 0; i < options.pools.size(); ++i) {
      for (int64_t r = 0; r < options.pools[i].size(); ++r) {
        state->first_rank_of[first_rank[i] + r] = first_rank[i];
        if (options.pools[i].replaceable) state->replaceable.insert(first_rank[i] + r);
      }
    }
    state->call_timeout = options.call_timeout;
    state->rejoin_timeout = options.rejoin_timeout;
    state->end_worker = [this](int64_t rank) {
      std::lock_guard<std::mutex> lock(launcher_mutex);
      if (launcher) launcher->kill(rank);
    };
    std::string secret = options.secret;
    if (secret.empty() && options.launcher == "external") {
      const char* env = std::getenv(kSecretEnv);
      if (!env || !*env) {
        throw ConfigError(
            "the external launcher needs a shared secret: set RLCORE_SECRET for the controller and "
            "every worker (e.g. RLCORE_SECRET=$(openssl rand -hex 32))");
      }
      secret = env;
    }
    if (secret.empty()) secret = generate_secret();
    advertise_host = options.advertise_host;
    if (advertise_host.empty()) advertise_host = options.bind_host == "0.0.0.0" ? hostname() : options.bind_host;

    ControlServerOptions server_options;
    if (options.transport == "ipc") {
      const char* tmp = std::getenv("TMPDIR");
      // The secret's tail makes the path unguessable and unique per run.
      server_options.bind = std::string("ipc://") + (tmp && *tmp ? tmp : "/tmp") + "/rlcore-" +
                            std::to_string(::getpid()) + "-" + secret.substr(secret.size() - 12) + ".sock";
    } else {
      server_options.bind = "tcp://" + options.bind_host + ":" + std::to_string(options.port);
    }
    server_options.secret = secret;
    server_options.heartbeat_interval = options.heartbeat_interval;
    server_options.heartbeat_timeout = options.heartbeat_timeout;
    server_options.shutdown_grace = options.shutdown_grace;
    ControlServer::Handlers handlers;
    handlers.on_hello = [this](const PeerInfo& peer) { return on_hello(peer); };
    handlers.on_message = [this](const PeerInfo& peer, Envelope message) { on_message(peer, std::move(message)); };
    handlers.on_lost = [this](const PeerInfo& peer, const std::string& reason) { on_lost(peer, reason); };
    handlers.on_tick = [this] { on_tick(); };
    if (options.process_groups) {
      // Workers of the local launcher share this host: a store nobody can reach from outside.
      store = options.launcher == "local"
                  ? RendezvousStore::on_this_host()
                  : std::make_unique<RendezvousStore>(options.bind_host, 0, options.collective_timeout);
    }
    server = std::make_unique<ControlServer>(server_options, handlers);
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      state->server = server.get();
    }
    const std::string bound = server->endpoint();
    endpoint = options.transport == "ipc" ? bound : "tcp://" + advertise_host + bound.substr(bound.rfind(':'));
    spdlog::info("controller: waiting for {} workers at {} ({} launcher)", world_size, endpoint, options.launcher);

    if (options.launcher == "local") {
      LocalLaunchOptions launch;
      launch.executable = options.worker_executable;
      launch.args = {"worker"};
      launch.args.insert(launch.args.end(), options.worker_args.begin(), options.worker_args.end());
      launch.controller = endpoint;
      launch.secret = secret;
      launch.nworkers = world_size;
      launch.env = options.worker_env;
      auto started = std::make_unique<LocalLauncher>(launch);
      std::lock_guard<std::mutex> lock(launcher_mutex);
      launcher = std::move(started);
    }
    wait_until_ready();
    build_groups();
  }

  void wait_until_ready() {
    const auto deadline = detail::Clock::now() + options.connect_timeout;
    std::unique_lock<std::mutex> lock(state->mutex);
    for (;;) {
      if (state->failure) throw WorkerLostError(state->failed_worker, *state->failure);
      if (static_cast<int64_t>(state->ready.size()) == world_size) return;
      if (detail::Clock::now() >= deadline) {
        std::vector<int64_t> not_ready;
        for (int64_t rank = 0; rank < world_size; ++rank) {
          if (!state->ready.count(rank)) not_ready.push_back(rank);
        }
        const std::string missing = join(not_ready, ", ", [](int64_t rank) { return std::to_string(rank); });
        throw TimeoutError(std::to_string(state->ready.size()) + " of " + std::to_string(world_size) +
                           " workers were ready within " + std::to_string(options.connect_timeout.count()) +
                           " ms; missing ranks: " + missing + " (controller at " + endpoint + ")");
      }
      state->changed.wait_for(lock, std::chrono::milliseconds(100));
    }
  }

  void build_groups() {
    std::lock_guard<std::mutex> lock(state->mutex);
    for (std::size_t index = 0; index < options.pools.size(); ++index) {
      const PoolSpec& pool = options.pools[index];
      std::vector<WorkerInfo> workers;
      std::map<std::string, MethodInfo> methods;
      nlohmann::json first_methods;
      for (int64_t rank = 0; rank < pool.size(); ++rank) {
        const int64_t global = first_rank[index] + rank;
        const PeerInfo& peer = state->peers.at(global);
        const nlohmann::json& ready = state->ready.at(global);
        WorkerInfo info{rank, global, peer.local_rank, peer.host, peer.pid, {}};
        for (const auto& [name, place] : ready["meshes"].items()) info.meshes[name] = mesh_rank_from_json(place);
        workers.push_back(std::move(info));
        if (rank == 0) {
          first_methods = ready["methods"];
          for (const auto& method : first_methods) {
            MethodInfo described{dispatch_mode_from_string(method.at("mode").get<std::string>()),
                                 method.at("mesh").get<std::string>()};
            methods[method.at("name").get<std::string>()] = described;
          }
        } else if (ready["methods"] != first_methods) {
          throw ConfigError("pool '" + pool.name + "': rank " + std::to_string(rank) +
                            " registered different methods than rank 0");
        }
      }
      for (const auto& [name, method] : methods) {
        if (method.mode != DispatchMode::kMeshCompute) continue;
        for (const auto& worker : workers) {
          if (!worker.meshes.count(method.mesh)) {
            throw ConfigError("method '" + name + "' of pool '" + pool.name + "' uses mesh '" + method.mesh +
                              "', which rank " + std::to_string(worker.rank) + " does not report");
          }
        }
      }
      groups[pool.name].reset(
          new WorkerGroup(pool.name, first_rank[index], std::move(workers), std::move(methods), state));
    }
  }

  void shutdown() {
    if (shut) return;
    shut = true;
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      state->closing = true;
    }
    for (auto& call : state->take_calls()) {
      call->promise.set_exception(std::make_exception_ptr(
          Error("call '" + call->method + "' on pool '" + call->pool + "' was cancelled: the cluster shut down")));
    }
    if (server) {
      for (int64_t rank = 0; rank < world_size; ++rank) {
        try {
          server->send(rank, Envelope{control_header("shutdown"), Batch()});
        } catch (const WorkerLostError&) {
          // not connected: nothing to tell
        }
      }
    }
    const auto grace = options.shutdown_grace + std::chrono::milliseconds(1000);
    std::unique_ptr<LocalLauncher> local;
    {
      std::lock_guard<std::mutex> lock(launcher_mutex);
      local = std::move(launcher);
    }
    if (local) {
      if (!local->wait_all(grace)) spdlog::warn("controller: workers still running after the shutdown grace");
      local->terminate(std::chrono::milliseconds(2000));
    } else if (server) {
      const auto deadline = detail::Clock::now() + grace;
      auto any_connected = [&] {
        for (int64_t rank = 0; rank < world_size; ++rank) {
          if (server->connected(rank)) return true;
        }
        return false;
      };
      while (any_connected() && detail::Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    if (server) server->close();
    store.reset();
  }
};

Cluster::Cluster(ClusterOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  try {
    impl_->start();
  } catch (...) {
    impl_->shutdown();
    throw;
  }
}

Cluster::~Cluster() {
  try {
    impl_->shutdown();
  } catch (const std::exception& e) {
    spdlog::error("controller: shutdown failed: {}", e.what());
  }
}

WorkerGroup& Cluster::group(const std::string& pool) {
  auto it = impl_->groups.find(pool);
  if (it == impl_->groups.end()) {
    throw ValueError("no resource pool '" + pool +
                     "'; pools: " + join(impl_->groups, ", ", [](const auto& entry) { return entry.first; }));
  }
  return *it->second;
}

std::vector<std::string> Cluster::pools() const {
  std::vector<std::string> names;
  for (const auto& pool : impl_->options.pools) names.push_back(pool.name);
  return names;
}

std::string Cluster::endpoint() const { return impl_->endpoint; }

std::vector<WorkerAddress> Cluster::workers() const {
  std::lock_guard<std::mutex> lock(impl_->state->mutex);
  std::vector<WorkerAddress> all;
  for (const auto& [rank, peer] : impl_->state->peers) all.push_back(WorkerAddress{rank, peer.host, peer.pid});
  return all;
}

std::optional<std::string> Cluster::failure() const {
  std::lock_guard<std::mutex> lock(impl_->state->mutex);
  return impl_->state->failure;
}

ControlServerStats Cluster::stats() const { return impl_->server->stats(); }

void Cluster::shutdown() { impl_->shutdown(); }

}  // namespace rlcore::runtime
