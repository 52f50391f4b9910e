// The worker's life: hello, setup (threads, process groups, roles), the call
// loop on the main thread while the I/O thread keeps heartbeats going, bye.
#include "rlcore/core/runtime/worker.h"

#include <cxxabi.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <typeinfo>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include "rlcore/core/runtime/control_client.h"
#include "rlcore/core/runtime/errors.h"
#include "rlcore/core/runtime/local_launcher.h"
#include "rlcore/core/runtime/mesh.h"
#include "rlcore/core/runtime/preemption.h"
#include "rlcore/core/runtime/process_groups.h"
#include "rlcore/core/runtime/secret.h"
#include "rlcore/device.h"
#include "rlcore/error.h"
#include "rlcore/fault_point.h"
#include "rlcore/fault_point.h"
#include "rlcore/string_join.h"
#include "runtime/worker_activity.h"

namespace rlcore::runtime {

namespace {

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

std::string exception_type(const std::exception& e) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : typeid(e).name();
  std::free(demangled);
  return name;
}

// The roles, groups and methods one worker hosts, destroyed roles first.
struct Hosted {
  std::unique_ptr<CommContext> comm;
  std::function<CommGroup(const std::string&, int64_t, int64_t)> join_group;  // empty without process groups
  MethodTable table;
  std::vector<std::shared_ptr<void>> roles;

  ~Hosted() {
    roles.clear();
    comm.reset();
  }
};

void build(Hosted& hosted, const nlohmann::json& setup, const WorkerOptions& options, const RoleRegistry& registry,
           detail::WorkerActivity& activity) {
  fault_point("worker.setup");
  const int64_t rank = setup.at("pool_rank").get<int64_t>();
  const int64_t size = setup.at("pool_size").get<int64_t>();
  const std::string pool = setup.at("pool").get<std::string>();
  const MeshShape mesh = mesh_from_json(setup.at("mesh"));
  // 0 (external launchers): this host's cores shared among the workers on it.
  const int64_t threads = threads_for_worker(setup.value("threads", int64_t{0}), options.launch.local_world_size);
  at::set_num_threads(static_cast<int>(threads));
  // Bound before the process groups: NCCL uses the current CUDA device.
  const at::Device device =
      resolve_device(setup.value("device", std::string("cpu")), options.launch.local_rank, "trainer.device");
  if (setup.contains("store") && !setup["store"].is_null()) {
    const auto& store = setup["store"];
    ProcessGroupOptions groups;
    if (store.contains("file")) {
      groups.store_file = store.at("file").get<std::string>();
    } else {
      groups.store_host = store.at("host").get<std::string>();
      groups.store_port = store.at("port").get<int>();
    }
    groups.prefix = store.at("prefix").get<std::string>();
    groups.timeout = std::chrono::milliseconds(store.at("timeout_ms").get<int64_t>());
    groups.rank = rank;
    groups.world_size = size;
    groups.local_rank = options.launch.local_rank;
    groups.mesh = mesh;
    if (device.is_cuda()) groups.device_backend = store.value("device_backend", std::string("nccl"));
    // A replaceable pool's workers have shared groups only (runtime/cluster.h).
    if (store.value("pool_groups", true)) hosted.comm = make_comm_context(groups);
    hosted.join_group = [groups, &activity](const std::string& name, int64_t group_rank, int64_t group_size) {
      activity.joined_shared_group(name);
      return join_shared_group(groups, name, group_rank, group_size);
    };
  }
  hosted.table.set_mesh_rank("default", default_mesh_rank(mesh_or_default(mesh, size), rank));
  for (const auto& role : setup.at("roles")) {
    RoleContext context;
    context.role = role.at("name").get<std::string>();
    context.type = role.at("type").get<std::string>();
    context.options = role.value("options", nlohmann::json::object());
    context.rank = rank;
    context.world_size = size;
    context.local_rank = options.launch.local_rank;
    context.host = options.host.empty() ? this_host() : options.host;
    context.pool = pool;
    context.comm = hosted.comm.get();
    context.join_group = hosted.join_group;
    RoleMethods methods(hosted.table, context.role);
    hosted.roles.push_back(registry.get(context.type)(context, methods));
  }
}

Envelope ready_message(const MethodTable& table) {
  Envelope ready{control_header("ready"), Batch()};
  ready.header["ok"] = true;
  ready.header["methods"] = nlohmann::json::array();
  for (const auto& [name, spec] : table.methods()) {
    ready.header["methods"].push_back({{"name", name}, {"mode", to_string(spec.mode)}, {"mesh", spec.mesh}});
  }
  ready.header["meshes"] = nlohmann::json::object();
  for (const auto& [name, place] : table.meshes()) {
    ready.header["meshes"][name] = {{"dp_rank", place.dp_rank}, {"dp_size", place.dp_size}, {"collect", place.collect}};
  }
  return ready;
}

Envelope run_call(const MethodTable& table, const Envelope& call) {
  Envelope reply{control_header("reply"), Batch()};
  reply.header["id"] = call.header["id"];
  const std::string method = call.header["method"].get<std::string>();
  const MethodSpec* spec = table.find(method);
  if (!spec) {
    reply.header["ok"] = false;
    reply.header["error"] = "no method '" + method + "' on this worker; methods: " +
                            join(table.methods(), ", ", [](const auto& entry) { return entry.first; });
    return reply;
  }
  try {
    fault_point(method);
    MethodResult result = spec->method(call.batch, call.header["args"]);
    reply.header["ok"] = true;
    reply.header["value"] = std::move(result.value);
    // Results of non-collect ranks are dropped by the controller; do not send them.
    const bool keep = spec->mode != DispatchMode::kMeshCompute || table.meshes().at(spec->mesh).collect;
    if (keep) reply.batch = std::move(result.batch);
    // The controller drops a header over its limit unread: fail the call here instead of leaving it unanswered.
    const std::size_t header_bytes = reply.header.dump().size();
    if (header_bytes > MessageLimits{}.max_header_bytes) {
      throw ValueError(
          "its reply value is " + std::to_string(header_bytes) + " bytes, over the control header's limit of " +
          std::to_string(MessageLimits{}.max_header_bytes) + "; large results belong in the reply's Batch");
    }
  } catch (const std::exception& e) {
    reply.header.erase("value");
    reply.batch = Batch();
    reply.header["ok"] = false;
    reply.header["error"] = exception_type(e) + ": " + e.what();
  }
  return reply;
}

void watch_parent(int64_t parent_pid) {
  if (parent_pid <= 0) return;
  // Set after exec (posix_spawn cannot), hence the re-check: the parent may
  // have died in between, and then we were re-parented already.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (static_cast<int64_t>(::getppid()) != parent_pid) {
    spdlog::error("worker: the controller (pid {}) is gone; exiting", parent_pid);
    std::_Exit(kWorkerExitControllerLost);
  }
}

}  // namespace

WorkerOptions worker_options_from_env(const EnvLookup& env) {
  WorkerOptions options;
  options.launch = parse_launch_env(env);
  options.controller = options.launch.controller;
  options.secret = env(kSecretEnv).value_or("");
  if (const auto parent = env("RLCORE_PARENT_PID")) {
    try {
      options.parent_pid = std::stoll(*parent);
    } catch (const std::exception&) {
      throw ConfigError("environment variable RLCORE_PARENT_PID='" + *parent + "' is not a pid");
    }
  }
  return options;
}

int run_worker(const WorkerOptions& options, const RoleRegistry& registry) {
  if (options.controller.empty()) {
    throw ConfigError("no controller address: pass --controller, or set RLCORE_CONTROLLER or MASTER_ADDR/MASTER_PORT");
  }
  watch_parent(options.parent_pid);
  // A peer that dies mid-collective must fail the collective here (EPIPE), not
  // kill this worker too with SIGPIPE: two deaths by signal at once would leave
  // the controller unable to tell which worker died first.
  ::signal(SIGPIPE, SIG_IGN);
  const std::string me = "worker rank " + std::to_string(options.launch.rank);
  // `srun` and a terminal's Ctrl-C signal every task: the controller decides
  // (a preemption checkpoint needs this worker), and its going away ends this one.
  ignore_first_termination_signal(me);
  ControlClientOptions client_options;
  client_options.endpoint = options.controller;
  client_options.secret = options.secret;
  client_options.connect_timeout = options.connect_timeout;
  detail::WorkerActivity activity;
  client_options.probe = [&activity] { return activity.probe(); };
  client_options.self = PeerInfo{options.launch.rank, options.launch.world_size, options.launch.local_rank,
                                 options.host.empty() ? this_host() : options.host, static_cast<int64_t>(::getpid())};
  ControlClient client(client_options, [me](const std::string& reason) {
    // The executor may be stuck in a method or a collective: leave without it.
    const bool stuck = reason.find("shutdown grace") != std::string::npos;
    spdlog::error("{}: {}; exiting", me, reason);
    spdlog::default_logger()->flush();
    std::_Exit(stuck ? kWorkerExitShutdownStuck : kWorkerExitControllerLost);
  });

  Welcome welcome;
  try {
    welcome = client.connect();
  } catch (const ConfigError& e) {
    spdlog::error("{}: {}", me, e.what());
    return kWorkerExitRefused;
  } catch (const TimeoutError& e) {
    spdlog::error("{}: {}", me, e.what());
    return kWorkerExitControllerLost;
  }

  activity.set_pool(welcome.setup.value("pool", std::string()));
  Hosted hosted;
  try {
    build(hosted, welcome.setup, options, registry, activity);
  } catch (const std::exception& e) {
    spdlog::error("{}: setup failed: {}", me, e.what());
    Envelope failed{control_header("ready"), Batch()};
    failed.header["ok"] = false;
    failed.header["error"] = e.what();
    client.send(failed);
    client.close(std::chrono::milliseconds(2000));
    return kWorkerExitSetupFailed;
  }
  client.send(ready_message(hosted.table));
  spdlog::debug("{}: ready with {} methods", me, hosted.table.methods().size());

  for (;;) {
    std::optional<Envelope> message = client.receive(std::chrono::milliseconds(200));
    if (!message) continue;  // liveness is the I/O thread's job
    if (message->type() == "shutdown") break;
    activity.method_started(message->header.value("method", std::string()));
    Envelope reply = run_call(hosted.table, *message);
    activity.method_ended();
    // A method that failed in a collective says which, so the controller can ask who reached it.
    if (!reply.header["ok"].get<bool>()) {
      nlohmann::json collective = activity.failed_collective();
      if (!collective.is_null()) reply.header["collective"] = std::move(collective);
    }
    client.send(reply);
  }
  client.send(Envelope{control_header("bye"), Batch()});
  client.close(std::chrono::milliseconds(2000));
  return kWorkerExitOk;
}

}  // namespace rlcore::runtime
