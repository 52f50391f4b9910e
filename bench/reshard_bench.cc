// Resharding benchmark of the hybrid engine over real ranks (gloo): a
// training layout (fsdp dp=N, or train-megatron tp x pp x dp) swapped into a
// native rollout (tp 1 or 2) and back, `bucketed` against the `naive`
// baseline, every engine made through the plugin registry as `rlcore` makes
// them. Prints one table row (bench/run_reshard_bench.sh): the slowest rank's
// swap times, aggregate GB/s against a memcpy of the same bytes run on every
// rank at once, bytes gathered and the ledger's and the measured swap peaks per
// rank (SwapStats: the process's high-water mark, which the manager's meter
// resets at each swap, so getrusage's maximum would not be the run's).
//
//   bench_reshard --model DIR --plugins DIR --world N [--trainer fsdp|megatron] [--train-tp T] [--train-pp P]
//                 [--tp T] [--mode bucketed|naive] [--gather-into-bucket true|false] [--rollout-dtype D]
//                 [--reps N] [--threads N] [--header]
// Without --rank it is the launcher: it hosts the rendezvous store and runs the N ranks.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "bench_processes.h"
#include "memory_reference.h"
#include "rlcore/config_node.h"
#include "rlcore/core/plugin_loader.h"
#include "rlcore/core/runtime/process_groups.h"
#include "rlcore/error.h"
#include "rlcore/inference_engine.h"
#include "rlcore/registry.h"
#include "rlcore/sharding_manager.h"

extern char** environ;

namespace {

namespace po = boost::program_options;
using namespace rlcore;

struct Args {
  std::string model, plugins, trainer = "fsdp", mode = "bucketed", rollout_dtype = "bfloat16";
  std::string gather_into_bucket = "true";  // the bucketed manager's option
  int64_t world = 2, train_tp = 1, train_pp = 1, tp = 1, rank = -1;
  int port = 0, reps = 3, threads = 1;
  bool header = false;
};

std::string layout_name(const Args& a) {
  std::string train = a.trainer == "fsdp"
                          ? "fsdp dp=" + std::to_string(a.world)
                          : "megatron tp=" + std::to_string(a.train_tp) + " pp=" + std::to_string(a.train_pp) +
                                " dp=" + std::to_string(a.world / (a.train_tp * a.train_pp));
  return train + " -> tp=" + std::to_string(a.tp) + " dp=" + std::to_string(a.world / a.tp);
}

std::string mode_name(const Args& a) {
  return a.mode == "bucketed" && a.gather_into_bucket == "false" ? "bucketed (gather apart)" : a.mode;
}

runtime::MeshShape mesh_of(const Args& a) {
  const int64_t replica = a.train_tp * a.train_pp;
  if (replica > 1) {
    if (a.tp != 1 && a.tp != a.train_tp) throw ValueError("--tp must be 1 or --train-tp with a model-parallel trainer");
    if (a.tp > 1)
      throw ValueError("--tp > 1 with a model-parallel trainer is not benchmarked (the trainer shares its tp group)");
    return {{"dp", a.world / replica}, {"pp", a.train_pp}, {"tp", a.train_tp}};
  }
  if (a.tp > 1) return {{"rollout_dp", a.world / a.tp}, {kRolloutTpGroup, a.tp}};
  return {};
}

// Largest (max) or total (sum) of a value over the ranks.
double reduce(const CommGroup& world, double value, bool max) {
  at::Tensor t = at::tensor({value}, at::kDouble);
  if (max) {
    std::vector<at::Tensor> all = world.all_gather(t);
    for (const at::Tensor& x : all) value = std::max(value, x.item<double>());
    return value;
  }
  world.all_reduce(t);
  return t.item<double>();
}

int run_rank(const Args& a) {
  at::set_num_threads(a.threads);
  const std::unique_ptr<CommContext> comm = bench::loopback_comm(a.port, "bench_reshard", a.rank, a.world, mesh_of(a));

  Registry registry;
  PluginLoader(registry).load_path(a.plugins);
  ComponentContext context;
  context.model_path = a.model;
  context.comm = comm.get();
  const std::string train_options = a.trainer == "megatron"
                                        ? "{megatron: {tensor_model_parallel_size: " + std::to_string(a.train_tp) +
                                              ", pipeline_model_parallel_size: " + std::to_string(a.train_pp) + "}}"
                                        : "{}";
  HybridEngines engines;
  engines.train = registry.create<TrainEngine>(a.trainer, ConfigNode::parse(train_options, "bench"), context);
  engines.rollout = registry.create<InferenceEngine>(
      "native",
      ConfigNode::parse("{dtype: " + a.rollout_dtype + ", tensor_model_parallel_size: " + std::to_string(a.tp) + "}",
                        "bench"),
      context);
  engines.adaptor =
      registry.create<WeightAdaptor>(a.trainer == "megatron" ? "megatron" : "identity", ConfigNode(), context);
  engines.offloader = registry.create<Offloader>("engine");
  if (comm->has_group(kRolloutTpGroup)) {
    engines.layout.tp_size = comm->group(kRolloutTpGroup).size();
    engines.layout.tp_rank = comm->group(kRolloutTpGroup).rank();
  }
  const ConfigNode manager_options =
      a.mode == "bucketed" ? ConfigNode::parse("{gather_into_bucket: " + a.gather_into_bucket + "}", "bench")
                           : ConfigNode();
  auto manager = registry.create<ShardingManager>(a.mode, manager_options);
  manager->attach(engines);

  const CommGroup& world = comm->world();
  double to_rollout = 1e30, to_train = 1e30;
  SwapStats best;
  int64_t peak = 0;
  int64_t measured = 0;
  for (int r = 0; r < a.reps; ++r) {
    world.barrier();
    const SwapStats in = manager->to_rollout(r + 1);
    const SwapStats out = manager->to_train();
    const double slowest_in = reduce(world, in.seconds, true);
    if (slowest_in < to_rollout) best = in;
    to_rollout = std::min(to_rollout, slowest_in);
    to_train = std::min(to_train, reduce(world, out.seconds, true));
    peak = std::max({peak, in.planned_peak_bytes, out.planned_peak_bytes});
    measured = std::max({measured, in.measured_peak_bytes, out.measured_peak_bytes});
  }
  const double measured_max = reduce(world, static_cast<double>(measured), true);
  const double bucket_bytes = static_cast<double>(best.bytes_moved);
  const double all_bytes = reduce(world, bucket_bytes, false);
  // Every rank copies its own bucket's bytes at the same time, as in the swap.
  world.barrier();
  const double memcpy_s = reduce(world, bucket_bytes / 1e9 / bench::memcpy_gbps(best.bytes_moved, a.reps, false), true);
  const double gathered = reduce(world, static_cast<double>(best.bytes_gathered), true);
  const double peak_max = reduce(world, static_cast<double>(peak), true);
  const double gather_s = reduce(world, best.gather_s, true);
  const double convert_s = reduce(world, best.convert_s + best.copy_s, true);
  if (a.rank != 0) return 0;
  if (a.header) {
    std::printf(
        "| layout | rollout dtype | mode | ranks | bucket MB/rank | to_rollout s | to_train s | swap GB/s | memcpy "
        "GB/s | "
        "ratio | gather s | convert + copy s | gathered MB/rank | ledger peak MB/rank | measured peak MB/rank |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  }
  const double swap_gbps = all_bytes / to_rollout / 1e9;
  const double memcpy_gbps = all_bytes / memcpy_s / 1e9;
  std::printf("| %s | %s | %s | %lld | %.1f | %.4f | %.4f | %.2f | %.2f | %.2f | %.4f | %.4f | %.1f | %.1f | %.1f |\n",
              layout_name(a).c_str(), a.rollout_dtype.c_str(), mode_name(a).c_str(), static_cast<long long>(a.world),
              bucket_bytes / 1e6, to_rollout, to_train, swap_gbps, memcpy_gbps, swap_gbps / memcpy_gbps, gather_s,
              convert_s, gathered / 1e6, peak_max / 1e6, measured_max / 1e6);
  std::fflush(stdout);
  return 0;
}

// Hosts the store and runs `world` copies of this program as ranks 0..N-1.
int launch(const Args& a, int argc, char** argv) {
  runtime::RendezvousStore store("127.0.0.1", 0, std::chrono::minutes(5));
  std::vector<pid_t> children;
  for (int64_t rank = 0; rank < a.world; ++rank) {
    std::vector<std::string> args(argv, argv + argc);
    args.insert(args.end(), {"--rank", std::to_string(rank), "--port", std::to_string(store.port())});
    std::vector<char*> raw;
    for (auto& s : args) raw.push_back(s.data());
    raw.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, raw.data(), environ) != 0) {
      throw Error("bench_reshard: cannot start rank " + std::to_string(rank));
    }
    children.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  if (failed) std::cerr << "bench_reshard: " << failed << " rank(s) failed\n";
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  po::options_description options("bench_reshard");
  options.add_options()("help,h", "this text")("model", po::value(&a.model)->required(), "HF checkpoint directory")(
      "plugins", po::value(&a.plugins)->required(), "plugin directory (build/plugins)")(
      "world", po::value(&a.world), "ranks (default 2)")("trainer", po::value(&a.trainer), "fsdp | megatron")(
      "train-tp", po::value(&a.train_tp), "megatron tensor parallel")("train-pp", po::value(&a.train_pp),
                                                                      "megatron pipeline parallel")(
      "tp", po::value(&a.tp), "rollout tensor parallel")("mode", po::value(&a.mode), "bucketed | naive")(
      "gather-into-bucket", po::value(&a.gather_into_bucket), "bucketed: true (default) | false")(
      "rollout-dtype", po::value(&a.rollout_dtype), "native dtype (default bfloat16)")(
      "reps", po::value(&a.reps), "swaps (default 3)")("threads", po::value(&a.threads), "intra-op threads per rank")(
      "header", po::bool_switch(&a.header), "print the table header first")("rank", po::value(&a.rank), "internal")(
      "port", po::value(&a.port), "internal");
  try {
    po::variables_map values;
    po::store(po::parse_command_line(argc, argv, options), values);
    if (values.count("help")) {
      std::cout << options;
      return 0;
    }
    po::notify(values);
    return a.rank < 0 ? launch(a, argc, argv) : run_rank(a);
  } catch (const std::exception& e) {
    std::cerr << "bench_reshard" << (a.rank >= 0 ? " rank " + std::to_string(a.rank) : std::string()) << ": "
              << e.what() << "\n";
    return 1;
  }
}
