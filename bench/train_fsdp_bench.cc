// bench_train_fsdp: step time, tokens/s and peak RSS per rank of the `fsdp`
// train engine at 1, 2, 4 ranks (one process each, gloo over loopback), in fp32
// and bf16 mixed precision, next to an eager-PyTorch training step of the same
// model (bench/python/train_baseline.py: fp32, or autocast bf16) and, in fp32,
// an unsharded libtorch baseline (plain Transformer + torch AdamW), all on the
// same global batch. The fraction of the FLOP roofline is 6 * params * tokens /
// step time over a big at::matmul's rate in that dtype, measured in the same
// run. One rank also runs with parameter and optimizer offload (verl's
// param_offload / optimizer_offload). With --device cuda the ranks and the
// matmul run on the GPU (one rank: NCCL gives each rank its own GPU) and the
// baselines, which run on the CPU, are left out. Prints a markdown table
// (docs/train-fsdp.md, docs/gpu.md).
//
//   bench_train_fsdp --model tiny=DIR --model 100m=DIR [--ranks 1,2,4] [--dtypes float32,bfloat16]
//                    [--steps 3] [--rounds 1] [--batch 8] [--prompt 32] [--response 32] [--micro 0] [--threads 2]
//                    [--python /usr/bin/python3] [--device cpu|cuda]
// Internally it re-runs itself with --role baseline|rank for each measured process.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <boost/program_options.hpp>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <nlohmann/json.hpp>
#include <torch/optim/adamw.h>

#include "fsdp_engine.h"
#include "bench_processes.h"
#include "python_baseline.h"
#include "rlcore/core/runtime/process_groups.h"
#include "rlcore/device.h"
#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"
#include "../tests/common/test_paths.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace rlcore {
namespace {

struct Args {
  std::vector<std::string> models;  // name=dir
  std::string ranks = "1,2,4";
  std::string dtypes = "float32,bfloat16";
  std::string python;  // empty: no eager-PyTorch baseline
  std::string baseline_script = rlcore_test::source_dir() + "/bench/python/train_baseline.py";
  int64_t steps = 3;
  int64_t rounds = 1;
  int64_t batch = 8;
  int64_t prompt = 32;
  int64_t response = 32;
  int64_t micro = 0;
  int threads = 2;
  std::string device = "cpu";
  std::string work;
  // Internal (one measured process).
  std::string role;
  std::string model_dir;
  std::string dtype = "float32";
  int checkpointing = 1;  // enable_gradient_checkpointing of the ranks
  int offload = 0;        // param_offload and optimizer_offload of the ranks
  int64_t rank = 0;
  int64_t world = 1;
  int port = 0;
  std::string result;
};

// Must match train_token() and advantage() in bench/python/train_baseline.py:
// both sides train on the same tokens.
int64_t train_token(int64_t row, int64_t position, int64_t vocab) {
  return 1 + (row * 7919 + position * 131 + 17) % (vocab - 1);
}
double advantage(int64_t row, int64_t position) {
  return static_cast<double>((row * 31 + position * 17) % 13) / 6.0 - 1.0;
}

Batch make_batch(const Args& a, int64_t vocab) {
  const int64_t len = a.prompt + a.response;
  at::Tensor ids = at::empty({a.batch, len}, at::kLong);
  at::Tensor adv = at::empty({a.batch, a.response}, at::kFloat);
  for (int64_t r = 0; r < a.batch; ++r) {
    for (int64_t t = 0; t < len; ++t) ids[r][t] = train_token(r, t, vocab);
    for (int64_t t = 0; t < a.response; ++t) adv[r][t] = advantage(r, t);
  }
  Batch batch(a.batch);
  batch.set("input_ids", ids);
  batch.set("attention_mask", at::ones({a.batch, len}, at::kLong));
  batch.set("responses", ids.slice(1, a.prompt).clone());
  batch.set("response_mask", at::ones({a.batch, a.response}));
  batch.set("advantages", adv);
  return batch;
}

at::Tensor pg_loss_of(const at::Tensor& log_prob, const Batch& rows, double scale) {
  return -(log_prob * rows.tensor("advantages") * rows.tensor("response_mask")).sum() * scale;
}

void write_result(const Args& a, const nlohmann::json& result) { std::ofstream(a.result) << result.dump(); }

int run_baseline(const Args& a) {
  const auto config = model::ModelConfig::from_file((fs::path(a.model_dir) / "config.json").string());
  model::Transformer transformer(config);
  {
    const SafetensorsCheckpoint checkpoint(a.model_dir);
    model::NamedTensors tensors;
    for (const auto& name : checkpoint.names()) tensors.emplace_back(name, checkpoint.view(name));
    transformer.load(tensors);
  }
  transformer.set_requires_grad(true);
  std::vector<at::Tensor> params;
  for (const auto& entry : transformer.named_parameters()) params.push_back(entry.second);
  torch::optim::AdamW adamw(params, torch::optim::AdamWOptions(1e-6).weight_decay(0.01));
  const Batch batch = make_batch(a, config.vocab_size);
  const double scale = 1.0 / batch.tensor("response_mask").sum().item<double>();
  const int64_t micro = a.micro > 0 ? a.micro : a.batch;
  const double seconds = bench::time_steps(a.steps, at::kCPU, [&] {
    adamw.zero_grad();
    for (int64_t begin = 0; begin < a.batch; begin += micro) {
      const Batch rows = batch.slice(begin, std::min(a.batch, begin + micro));
      // Like the engine, only the positions that predict response tokens go through the head.
      const at::Tensor hidden = transformer.hidden_states(rows.tensor("input_ids"), rows.tensor("attention_mask"));
      const at::Tensor logits = transformer.apply_head(hidden.slice(1, a.prompt - 1, a.prompt - 1 + a.response));
      const at::Tensor logp =
          at::log_softmax(logits.to(at::kFloat), -1).gather(-1, rows.tensor("responses").unsqueeze(-1)).squeeze(-1);
      pg_loss_of(logp, rows, scale).backward();
    }
    adamw.step();
  });
  const int64_t state = model::num_parameters(config) * 4 * 4;  // params, grads, two moments
  write_result(a, {{"seconds", seconds}, {"rss_mb", bench::peak_rss_mb()}, {"state_mb", state / 1e6}});
  return 0;
}

int run_rank(const Args& a) {
  const std::unique_ptr<CommContext> comm = bench::loopback_comm(a.port, "bench_fsdp", a.rank, a.world);
  ComponentContext context;
  context.model_path = a.model_dir;
  context.comm = comm.get();
  const at::Device device = resolve_device(a.device, a.rank, "--device");
  context.device = device.str();
  train_fsdp::FsdpOptions options;
  options.fsdp_config.mixed_precision.param_dtype = a.dtype;
  options.enable_gradient_checkpointing = a.checkpointing != 0;
  options.fsdp_config.param_offload = a.offload != 0;
  options.fsdp_config.optimizer_offload = a.offload != 0;
  train_fsdp::FsdpEngine engine(options, context);
  const Batch all = make_batch(a, engine.model_config().vocab_size);
  const Batch mine = all.slice(a.rank * a.batch / a.world, (a.rank + 1) * a.batch / a.world);
  ForwardOptions forward;
  forward.micro_batching.micro_batch_size = a.micro;
  auto loss = [](const Batch& rows, const ModelOutput& out, const GlobalBatchInfo& global) {
    return LossOutput{pg_loss_of(out.log_prob, rows, global.dp_size / global.num_tokens), {}};
  };
  if (!device.is_cpu()) reset_peak_memory(device);  // on the CPU it would also reset ru_maxrss
  const double seconds = bench::time_steps(a.steps, device, [&] { engine.train_step(mine, forward, loss); });
  const TrainMemory memory = engine.memory();
  const double state = static_cast<double>(memory.param_bytes + memory.grad_bytes + memory.optimizer_bytes);
  const double device_peak = device.is_cpu() ? 0.0 : static_cast<double>(device_memory_stats(device).peak_allocated);
  write_result(a, {{"seconds", seconds},
                   {"rss_mb", bench::peak_rss_mb()},
                   {"state_mb", state / 1e6},
                   {"device_peak_mb", device_peak / 1e6}});
  return 0;
}

// Runs this executable once per rank with `extra` arguments; returns their results.
std::vector<nlohmann::json> spawn_processes(const std::string& self, const Args& a, const std::string& model_dir,
                                            const std::string& role, int64_t world) {
  std::unique_ptr<runtime::RendezvousStore> store;
  if (role == "rank") store = std::make_unique<runtime::RendezvousStore>("127.0.0.1", 0, std::chrono::minutes(10));
  const int threads = std::max(1, a.threads / static_cast<int>(world));
  std::vector<std::vector<std::string>> args;
  std::vector<std::string> results;
  for (int64_t rank = 0; rank < world; ++rank) {
    results.push_back(
        (fs::path(a.work) / (role + "_" + std::to_string(world) + "_" + std::to_string(rank) + ".json")).string());
    args.push_back({"--role",          role,
                    "--model-dir",     model_dir,
                    "--rank",          std::to_string(rank),
                    "--world",         std::to_string(world),
                    "--port",          std::to_string(store ? store->port() : 0),
                    "--result",        results.back(),
                    "--steps",         std::to_string(a.steps),
                    "--batch",         std::to_string(a.batch),
                    "--prompt",        std::to_string(a.prompt),
                    "--response",      std::to_string(a.response),
                    "--micro",         std::to_string(a.micro),
                    "--threads",       std::to_string(threads),
                    "--dtype",         a.dtype,
                    "--checkpointing", std::to_string(a.checkpointing),
                    "--offload",       std::to_string(a.offload),
                    "--device",        a.device});
  }
  bench::run_processes(self, args, threads, "bench_train_fsdp " + role);
  std::vector<nlohmann::json> out;
  for (const std::string& path : results) {
    std::ifstream in(path);
    out.push_back(nlohmann::json::parse(in));
  }
  return out;
}

// The best of a few big square matmuls in `dtype` on `device`, in FLOP/s: the
// roofline the training steps are compared with (same threads, same process
// settings).
double peak_matmul_flops(at::ScalarType dtype, const at::Device& device) {
  constexpr int64_t n = 2048;
  const at::Tensor x = at::randn({n, n}).to(device, dtype);
  const at::Tensor y = at::randn({n, n}).to(device, dtype);
  const double seconds = bench::time_steps(5, device, [&] { at::matmul(x, y); });
  return 2.0 * n * n * n / seconds;
}

// One table row; eager seconds <= 0: no eager-PyTorch time to compare with.
struct RowSpec {
  std::string model, dtype, run;
  double tokens = 0, flops_per_step = 0, peak_flops = 0;
  double eager_seconds = 0, eager_checkpointed_seconds = 0;
};

// `value` with `digits` decimals, or "-" when there is none (<= 0).
std::string fixed_or_dash(double value, int digits, const char* suffix = "") {
  if (value <= 0) return "-";
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f%s", digits, value, suffix);
  return text;
}

void print_row(const RowSpec& row, const std::vector<nlohmann::json>& ranks) {
  double seconds = 0, rss = 0, state = 0, device_peak = 0;
  for (const auto& r : ranks) {
    seconds = std::max(seconds, r["seconds"].get<double>());
    rss = std::max(rss, r.value("rss_mb", 0.0));
    state = std::max(state, r.value("state_mb", 0.0));
    device_peak = std::max(device_peak, r.value("device_peak_mb", 0.0));
  }
  const double vs_eager = row.eager_seconds > 0 ? row.eager_seconds / seconds : 0;
  const double vs_checkpointed = row.eager_checkpointed_seconds > 0 ? row.eager_checkpointed_seconds / seconds : 0;
  std::cout << "| " << row.model << " | " << row.dtype << " | " << row.run << " | " << fixed_or_dash(seconds, 3)
            << " | " << fixed_or_dash(row.tokens / seconds, 0) << " | " << fixed_or_dash(vs_eager, 2, "x") << " | "
            << fixed_or_dash(vs_checkpointed, 2, "x") << " | "
            << fixed_or_dash(100.0 * row.flops_per_step / seconds / row.peak_flops, 1, "%") << " | "
            << fixed_or_dash(rss, 0) << " | " << fixed_or_dash(device_peak, 0) << " | " << fixed_or_dash(state, 1)
            << " |" << std::endl;
}

// The eager-PyTorch step of `dir` in `dtype`, as a result row; nullopt when it could not run.
std::optional<nlohmann::json> time_eager(const Args& a, const std::string& dir, const std::string& dtype,
                                         bool checkpointing) {
  using bench::shell_quote;
  const std::string command = shell_quote(a.python) + " " + shell_quote(a.baseline_script) + " --model " +
                              shell_quote(dir) + " --dtype " + dtype + " --batch " + std::to_string(a.batch) +
                              " --prompt " + std::to_string(a.prompt) + " --response " + std::to_string(a.response) +
                              " --steps " + std::to_string(a.steps) + " --threads " + std::to_string(a.threads) +
                              (checkpointing ? " --checkpointing" : "");
  return bench::run_python_json(command, "bench_train_fsdp");
}

// One configuration of the table (a model, a dtype, a kind of run) and its
// fastest result over the rounds.
struct Config {
  std::string model, dir, dtype, run;
  std::string role;  // eager | eager_checkpointed | baseline | rank
  int64_t world = 1;
  int checkpointing = 1;
  int offload = 0;
  std::vector<nlohmann::json> best;  // per process, of the round whose slowest process was fastest
};

double slowest(const std::vector<nlohmann::json>& results) {
  double seconds = 0;
  for (const auto& r : results) seconds = std::max(seconds, r["seconds"].get<double>());
  return seconds;
}

std::vector<Config> table_configs(const Args& a, const std::vector<int64_t>& worlds,
                                  const std::vector<std::string>& dtypes) {
  std::vector<Config> configs;
  for (const std::string& spec : a.models) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) throw ConfigError("--model takes NAME=DIR, got '" + spec + "'");
    const std::string name = spec.substr(0, eq);
    const std::string dir = spec.substr(eq + 1);
    for (const std::string& dtype : dtypes) {
      const std::string eager = dtype == "bfloat16" ? "eager PyTorch autocast" : "eager PyTorch";
      if (!a.python.empty() && a.device == "cpu") {
        configs.push_back({name, dir, dtype, eager + " (1 process)", "eager"});
        configs.push_back({name, dir, dtype, eager + " + layer checkpointing (1 process)", "eager_checkpointed"});
      }
      if (dtype == "float32" && a.device == "cpu")
        configs.push_back({name, dir, dtype, "unsharded libtorch (1 process)", "baseline"});
      for (int64_t world : worlds)
        configs.push_back({name, dir, dtype, "fsdp " + std::to_string(world) + " rank(s)", "rank", world});
      // Like-for-like with the plain eager step: the graph kept from the forward, no recompute.
      configs.push_back({name, dir, dtype, "fsdp 1 rank, no checkpointing", "rank", 1, 0});
      // Parameters and AdamW state in host memory between steps, reloaded through the copy stream.
      configs.push_back({name, dir, dtype, "fsdp 1 rank, param + optimizer offload", "rank", 1, 1, 1});
    }
  }
  return configs;
}

// Runs `config` once; empty when the eager baseline could not run.
std::vector<nlohmann::json> measure(const Args& a, const std::string& self, const Config& config) {
  if (config.role == "eager" || config.role == "eager_checkpointed") {
    const auto eager = time_eager(a, config.dir, config.dtype, config.role == "eager_checkpointed");
    return eager ? std::vector<nlohmann::json>{*eager} : std::vector<nlohmann::json>{};
  }
  Args run = a;
  run.dtype = config.dtype;
  run.checkpointing = config.checkpointing;
  run.offload = config.offload;
  return spawn_processes(self, run, config.dir, config.role, config.world);
}

int run_driver(const Args& a, const std::string& self) {
  fs::create_directories(a.work);
  const at::Device device = resolve_device(a.device, 0, "--device");
  std::vector<int64_t> worlds;
  std::stringstream list(a.ranks);
  for (std::string item; std::getline(list, item, ',');) worlds.push_back(std::stoll(item));
  std::vector<std::string> dtypes;
  std::stringstream dtype_list(a.dtypes);
  for (std::string item; std::getline(dtype_list, item, ',');) dtypes.push_back(item);
  const double tokens = static_cast<double>(a.batch * (a.prompt + a.response));
  std::vector<Config> configs = table_configs(a, worlds, dtypes);
  // Rounds interleave the configurations, so that each gets its share of the
  // machine's quieter moments; the peak is measured once per round too.
  std::map<std::string, double> peak;
  for (int64_t round = 0; round < a.rounds; ++round) {
    for (const std::string& dtype : dtypes)
      peak[dtype] = std::max(peak[dtype], peak_matmul_flops(dtype == "bfloat16" ? at::kBFloat16 : at::kFloat, device));
    for (Config& config : configs) {
      std::vector<nlohmann::json> results = measure(a, self, config);
      if (!results.empty() && (config.best.empty() || slowest(results) < slowest(config.best)))
        config.best = std::move(results);
    }
  }
  std::cout << "device " << device.str() << "; peak matmul (2048^3, " << a.threads << " threads, best of the rounds):";
  for (const std::string& dtype : dtypes)
    std::cout << " " << dtype << " " << static_cast<int64_t>(peak[dtype] / 1e9) << " GFLOP/s;";
  std::cout << "\nglobal batch " << a.batch << " x " << a.prompt + a.response << " tokens; " << a.rounds
            << " round(s) of every run, each " << a.steps << " timed steps after 1 warm-up; the fastest step of all "
            << "is reported; " << a.threads << " threads shared by the ranks; % of peak = 6 x params x tokens / "
            << "step s / peak matmul of the dtype\n\n"
            << "| model | dtype | run | step s | tokens/s | vs eager | vs eager + ckpt | % of peak | "
               "peak RSS/rank MB | peak device/rank MB | train state/rank MB |\n"
            << "|---|---|---|---|---|---|---|---|---|---|---|" << std::endl;
  for (const Config& config : configs) {
    if (config.best.empty()) continue;
    RowSpec row{config.model, config.dtype, config.run, tokens, 0, peak[config.dtype], 0, 0};
    const auto model_config = model::ModelConfig::from_file((fs::path(config.dir) / "config.json").string());
    row.flops_per_step = 6.0 * static_cast<double>(model::num_parameters(model_config)) * tokens;
    for (const Config& other : configs) {
      if (other.model != config.model || other.dtype != config.dtype || other.best.empty()) continue;
      if (other.role == "eager") row.eager_seconds = slowest(other.best);
      if (other.role == "eager_checkpointed") row.eager_checkpointed_seconds = slowest(other.best);
    }
    print_row(row, config.best);
  }
  return 0;
}

}  // namespace
}  // namespace rlcore

int main(int argc, char** argv) {
  rlcore::Args a;
  po::options_description options("bench_train_fsdp");
  options.add_options()("help,h", "this text")("model", po::value(&a.models)->composing(), "NAME=DIR (repeatable)")(
      "ranks", po::value(&a.ranks), "comma-separated rank counts (default 1,2,4)")(
      "dtypes", po::value(&a.dtypes), "compute dtypes, float32 and/or bfloat16 (default both)")(
      "python", po::value(&a.python), "python with torch for the eager baseline (e.g. /usr/bin/python3)")(
      "baseline-script", po::value(&a.baseline_script), "the eager baseline script")("steps", po::value(&a.steps),
                                                                                     "timed steps (default 3)")(
      "rounds", po::value(&a.rounds), "times every run is repeated, interleaved; the fastest is kept (default 1)")(
      "batch", po::value(&a.batch), "global rows (default 8)")(
      "prompt", po::value(&a.prompt), "prompt tokens per row (default 32)")("response", po::value(&a.response),
                                                                            "response tokens per row (default 32)")(
      "micro", po::value(&a.micro), "micro-batch rows (0: all; default 0)")(
      "threads", po::value(&a.threads), "intra-op threads, split among the ranks (default 2)")(
      "device", po::value(&a.device), "cpu or cuda (default cpu)")(
      "work", po::value(&a.work), "directory for per-process results")("role", po::value(&a.role), "internal")(
      "model-dir", po::value(&a.model_dir), "internal")("dtype", po::value(&a.dtype), "internal")(
      "checkpointing", po::value(&a.checkpointing), "internal")("offload", po::value(&a.offload), "internal")(
      "rank", po::value(&a.rank), "internal")("world", po::value(&a.world), "internal")(
      "port", po::value(&a.port), "internal")("result", po::value(&a.result), "internal");
  try {
    po::variables_map values;
    po::store(po::parse_command_line(argc, argv, options), values);
    po::notify(values);
    if (values.count("help")) {
      std::cout << options << "\n";
      return 0;
    }
    at::set_num_threads(a.threads);
    if (a.role == "baseline") return rlcore::run_baseline(a);
    if (a.role == "rank") return rlcore::run_rank(a);
    if (a.models.empty()) throw rlcore::ConfigError("bench_train_fsdp: give at least one --model NAME=DIR");
    if (a.work.empty())
      a.work = (fs::temp_directory_path() / ("bench_train_fsdp_" + std::to_string(::getpid()))).string();
    return rlcore::run_driver(a, fs::canonical("/proc/self/exe").string());
  } catch (const std::exception& e) {
    std::cerr << "bench_train_fsdp: " << e.what() << "\n";
    return 1;
  }
}
