// `rlcore worker`: run one worker process (started by the local launcher,
// mpirun, srun or by hand), or with --check be a controller that starts or
// awaits workers of the built-in diag role and checks the control and data planes.
#include <iomanip>
#include <ostream>
#include <sstream>
#include <thread>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "rlcore/core/runtime/cluster.h"
#include "rlcore/core/runtime/worker.h"
#include "rlcore/core/session.h"
#include "rlcore/core/workers/roles.h"
#include "rlcore/error.h"

namespace po = boost::program_options;

namespace rlcore::cli {
namespace {

struct CheckArgs {
  int64_t nworkers = 0;
  std::string launcher = "local";
  std::string bind = "127.0.0.1";
  int port = 0;
  std::string mesh;
  double hold_s = 0;
  double timeout_s = 120;
  bool no_process_groups = false;
  std::string worker_log_level = "warn";
};

runtime::MeshShape parse_mesh(const std::string& text) {
  runtime::MeshShape mesh;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const auto equals = item.find('=');
    if (equals == std::string::npos) throw ConfigError("--mesh: '" + item + "' is not NAME=SIZE");
    try {
      mesh.push_back(runtime::MeshDim{item.substr(0, equals), std::stoll(item.substr(equals + 1))});
    } catch (const std::logic_error&) {
      throw ConfigError("--mesh: '" + item + "' has no integer size");
    }
  }
  return mesh;
}

void expect(bool ok, const std::string& what) {
  if (!ok) throw Error("check failed: " + what);
}

void check_groups(runtime::WorkerGroup& group, std::ostream& out) {
  const runtime::CallOutput info = group.call("diag.info").get();
  out << "  rank  host                  pid      threads  groups (rank/size)\n";
  for (const auto& reply : info.replies) {
    std::string groups;
    for (const auto& [name, g] : reply.value["groups"].items()) {
      groups += (groups.empty() ? "" : " ") + name + " " + g["rank"].dump() + "/" + g["size"].dump();
    }
    out << "  " << std::left << std::setw(6) << reply.rank << std::setw(22) << reply.value["host"].get<std::string>()
        << std::setw(9) << reply.value["pid"].get<int64_t>() << std::setw(9) << reply.value["threads"].get<int64_t>()
        << groups << "\n";
  }
  if (info.replies.front().value["groups"].empty()) return;
  for (const auto& [name, g] : info.replies.front().value["groups"].items()) {
    const runtime::CallOutput reduced = group.call("diag.all_reduce", Batch(), {{"group", name}}).get();
    for (const auto& reply : reduced.replies) {
      double expected = 0;
      for (const auto& member : reply.value["group_ranks"]) expected += member.get<double>() + 1;
      expect(reply.value["sum"].get<double>() == expected,
             "all_reduce over '" + name + "' on rank " + std::to_string(reply.rank));
    }
    out << "  all_reduce over '" << name << "': ok\n";
  }
}

void check_dispatch(runtime::WorkerGroup& group, std::ostream& out) {
  const int64_t rows = 3 * group.size() + 1;  // not a multiple: exercises padding
  Batch input(rows);
  input.set("x", at::arange(rows, at::kDouble));
  const runtime::CallOutput scaled = group.call("diag.scale", input, {{"factor", 2.0}}).get();
  expect(scaled.batch.size() == rows && at::equal(scaled.batch.tensor("y"), input.tensor("x") * 2),
         "dp_compute of diag.scale");
  const runtime::CallOutput meshed = group.call("diag.scale_mesh", input, {{"factor", 3.0}}).get();
  expect(meshed.batch.size() == rows && at::equal(meshed.batch.tensor("y"), input.tensor("x") * 3),
         "mesh_compute of diag.scale_mesh");
  out << "  dp_compute and mesh_compute over " << rows << " rows: ok\n";
}

int run_check(const CheckArgs& args, CommandIo io) {
  runtime::ClusterOptions options;
  options.launcher = args.launcher;
  options.bind_host = args.bind;
  options.port = args.port;
  options.process_groups = !args.no_process_groups;
  options.connect_timeout = std::chrono::milliseconds(static_cast<int64_t>(args.timeout_s * 1000));
  options.worker_args = {"--log-level", args.worker_log_level};
  runtime::PoolSpec pool;
  pool.name = "check";
  pool.nodes = {args.nworkers};
  pool.roles = {runtime::RoleSpec{"diag", "diag", nlohmann::json::object()}};
  pool.mesh = parse_mesh(args.mesh);
  options.pools = {pool};
  runtime::Cluster cluster(options);
  runtime::WorkerGroup& group = cluster.group("check");
  io.out << "controller at " << cluster.endpoint() << ": " << group.size() << " workers ready\n";
  check_groups(group, io.out);
  check_dispatch(group, io.out);
  io.out << "check passed\n" << std::flush;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(args.hold_s);
  while (std::chrono::steady_clock::now() < until && !cluster.failure()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (const auto failure = cluster.failure()) throw Error(*failure);
  cluster.shutdown();
  return 0;
}

}  // namespace

int run_command_worker(const std::vector<std::string>& args, CommandIo io) {
  CommonArgs common;
  std::string controller;
  double connect_timeout_s = 120;
  bool check = false;
  CheckArgs check_args;
  po::options_description options(
      "rlcore worker [--controller ENDPOINT] [--log-level L]\n"
      "  A worker: rank from RANK/WORLD_SIZE/LOCAL_RANK (or OMPI_COMM_WORLD_*, SLURM_*), secret from\n"
      "  RLCORE_SECRET, controller from --controller, RLCORE_CONTROLLER or MASTER_ADDR/MASTER_PORT.\n"
      "rlcore worker --check [--nworkers N] [--launcher local|external] [--bind HOST] [--port P] [--mesh dp=2,tp=2]\n"
      "  A controller that starts (local) or awaits (external) N diag workers and checks dispatch and groups");
  add_common_options(options, common);
  options.add_options()("controller", po::value(&controller), "controller endpoint, tcp://HOST:PORT")(
      "connect-timeout", po::value(&connect_timeout_s), "seconds to wait for the controller's welcome (120)")(
      "check", po::bool_switch(&check), "run as a checking controller")(
      "nworkers", po::value(&check_args.nworkers), "--check: workers (default: WORLD_SIZE, else 2)")(
      "launcher", po::value(&check_args.launcher), "--check: local or external")(
      "bind", po::value(&check_args.bind), "--check: address to listen on (127.0.0.1)")(
      "port", po::value(&check_args.port), "--check: port to listen on (0: any; fix it for external)")(
      "mesh", po::value(&check_args.mesh), "--check: mesh of the workers, e.g. dp=2,tp=2 (default dp=N)")(
      "hold", po::value(&check_args.hold_s), "--check: seconds to keep the workers up after the check")(
      "timeout", po::value(&check_args.timeout_s), "--check: seconds to wait for every worker (120)")(
      "no-process-groups", po::bool_switch(&check_args.no_process_groups), "--check: skip c10d groups")(
      "worker-log-level", po::value(&check_args.worker_log_level), "--check: log level of local workers (warn)");
  std::vector<std::string> positional;
  parse_command_line(args, options, positional);
  if (!positional.empty())
    throw ConfigError("rlcore worker takes no positional arguments, got '" + positional[0] + "'");
  apply_log_level(common.log_level);

  runtime::WorkerOptions worker = runtime::worker_options_from_env(runtime::process_env());
  if (check) {
    if (check_args.nworkers == 0)
      check_args.nworkers = worker.launch.source == "default" ? 2 : worker.launch.world_size;
    return run_check(check_args, io);
  }
  if (!controller.empty()) worker.controller = controller;
  worker.connect_timeout = std::chrono::milliseconds(static_cast<int64_t>(connect_timeout_s * 1000));
  // Plugins are loaded before connecting, so a worker that cannot build its
  // engines fails setup with the loader's message.
  Session session(common.plugin_paths);
  runtime::RoleRegistry roles;
  runtime::add_builtin_roles(roles);
  workers::add_trainer_roles(roles, session.registry());
  return runtime::run_worker(worker, roles);
}

}  // namespace rlcore::cli
