// bench_train_fsdp: step time, tokens/s and peak RSS per rank of the `fsdp`
// train engine at 1, 2, 4 ranks (one process each, gloo over loopback) next to
// an unsharded single-process baseline (plain Transformer + torch AdamW) on the
// same global batch. Prints a markdown table (docs/train-fsdp.md).
//
//   bench_train_fsdp --model tiny=DIR --model 100m=DIR [--ranks 1,2,4] [--steps 3]
//                    [--batch 8] [--prompt 32] [--response 32] [--micro 0] [--threads 2]
// Internally it re-runs itself with --role baseline|rank for each measured process.
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>
#include <torch/optim/adamw.h>

#include "fsdp_engine.h"
#include "rlcore/core/runtime/process_groups.h"
#include "rlcore/error.h"
#include "rlcore/safetensors.h"

extern char** environ;

namespace po = boost::program_options;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace rlcore {
namespace {

struct Args {
  std::vector<std::string> models;  // name=dir
  std::string ranks = "1,2,4";
  int64_t steps = 3;
  int64_t batch = 8;
  int64_t prompt = 32;
  int64_t response = 32;
  int64_t micro = 0;
  int threads = 2;
  std::string work;
  // Internal (one measured process).
  std::string role;
  std::string model_dir;
  int64_t rank = 0;
  int64_t world = 1;
  int port = 0;
  std::string result;
};

Batch make_batch(const Args& a, int64_t vocab) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(7);
  const int64_t len = a.prompt + a.response;
  const at::Tensor ids = at::randint(1, vocab, {a.batch, len}, generator, at::kLong);
  Batch batch(a.batch);
  batch.set("input_ids", ids);
  batch.set("attention_mask", at::ones({a.batch, len}, at::kLong));
  batch.set("responses", ids.slice(1, a.prompt).clone());
  batch.set("response_mask", at::ones({a.batch, a.response}));
  batch.set("advantages", at::randn({a.batch, a.response}, generator));
  return batch;
}

at::Tensor pg_loss_of(const at::Tensor& log_prob, const Batch& rows, double scale) {
  return -(log_prob * rows.tensor("advantages") * rows.tensor("response_mask")).sum() * scale;
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// Runs `step` once to warm up, then `steps` times; the fastest step's seconds
// (the machine is shared, so the minimum is the least disturbed measurement).
template <class Step>
double time_steps(int64_t steps, Step step) {
  step();
  double best = std::numeric_limits<double>::infinity();
  for (int64_t s = 0; s < steps; ++s) {
    const auto start = Clock::now();
    step();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
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
  const double seconds = time_steps(a.steps, [&] {
    adamw.zero_grad();
    for (int64_t begin = 0; begin < a.batch; begin += micro) {
      const Batch rows = batch.slice(begin, std::min(a.batch, begin + micro));
      // Like the engine, only the positions that predict response tokens go through the head.
      const at::Tensor hidden = transformer.hidden_states(rows.tensor("input_ids"), rows.tensor("attention_mask"));
      const at::Tensor logits = transformer.apply_head(hidden.slice(1, a.prompt - 1, a.prompt - 1 + a.response));
      const at::Tensor logp = at::log_softmax(logits.to(at::kFloat), -1)
                                  .gather(-1, rows.tensor("responses").unsqueeze(-1))
                                  .squeeze(-1);
      pg_loss_of(logp, rows, scale).backward();
    }
    adamw.step();
  });
  const int64_t state = model::num_parameters(config) * 4 * 4;  // params, grads, two moments
  write_result(a, {{"seconds", seconds}, {"rss_mb", peak_rss_mb()}, {"state_mb", state / 1e6}});
  return 0;
}

int run_rank(const Args& a) {
  ProcessGroupOptions pg;
  pg.store_host = "127.0.0.1";
  pg.store_port = a.port;
  pg.prefix = "bench_fsdp";
  pg.rank = a.rank;
  pg.world_size = a.world;
  pg.local_address = "127.0.0.1";
  const std::unique_ptr<CommContext> comm = make_comm_context(pg);
  ComponentContext context;
  context.model_path = a.model_dir;
  context.comm = comm.get();
  fsdp::FsdpEngine engine(fsdp::FsdpOptions{}, context);
  const Batch all = make_batch(a, engine.model_config().vocab_size);
  const Batch mine = all.slice(a.rank * a.batch / a.world, (a.rank + 1) * a.batch / a.world);
  ForwardOptions forward;
  forward.micro_batching.micro_batch_size = a.micro;
  auto loss = [](const Batch& rows, const ModelOutput& out, const GlobalBatchInfo& global) {
    return LossOutput{pg_loss_of(out.log_prob, rows, global.dp_size / global.num_tokens), {}};
  };
  const double seconds = time_steps(a.steps, [&] { engine.train_step(mine, forward, loss); });
  const TrainMemory memory = engine.memory();
  const double state = static_cast<double>(memory.param_bytes + memory.grad_bytes + memory.optimizer_bytes);
  write_result(a, {{"seconds", seconds}, {"rss_mb", peak_rss_mb()}, {"state_mb", state / 1e6}});
  return 0;
}

// Runs this executable once per rank with `extra` arguments; returns their results.
std::vector<nlohmann::json> spawn_processes(const std::string& self, const Args& a, const std::string& model_dir,
                                            const std::string& role, int64_t world) {
  std::unique_ptr<RendezvousStore> store;
  if (role == "rank") store = std::make_unique<RendezvousStore>("127.0.0.1", 0, std::chrono::minutes(10));
  const int threads = std::max(1, a.threads / static_cast<int>(world));
  std::vector<pid_t> pids;
  std::vector<std::string> results;
  for (int64_t rank = 0; rank < world; ++rank) {
    results.push_back((fs::path(a.work) / (role + "_" + std::to_string(world) + "_" + std::to_string(rank) + ".json")).string());
    std::vector<std::string> argv = {self, "--role", role, "--model-dir", model_dir, "--rank", std::to_string(rank),
                                     "--world", std::to_string(world), "--port", std::to_string(store ? store->port() : 0),
                                     "--result", results.back(), "--steps", std::to_string(a.steps),
                                     "--batch", std::to_string(a.batch), "--prompt", std::to_string(a.prompt),
                                     "--response", std::to_string(a.response), "--micro", std::to_string(a.micro),
                                     "--threads", std::to_string(threads)};
    std::vector<char*> raw;
    for (auto& s : argv) raw.push_back(s.data());
    raw.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, raw.data(), environ) != 0)
      throw IoError("bench_train_fsdp: cannot spawn " + self);
    pids.push_back(pid);
  }
  std::vector<nlohmann::json> out;
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    ::waitpid(pids[i], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw Error("bench_train_fsdp: " + role + " process " + std::to_string(i) + " of " + std::to_string(world) + " failed");
    std::ifstream in(results[i]);
    out.push_back(nlohmann::json::parse(in));
  }
  return out;
}

void print_row(const std::string& model, const std::string& what, const std::vector<nlohmann::json>& ranks,
               double tokens, double baseline_seconds) {
  double seconds = 0, rss = 0, state = 0;
  for (const auto& r : ranks) {
    seconds = std::max(seconds, r["seconds"].get<double>());
    rss = std::max(rss, r["rss_mb"].get<double>());
    state = std::max(state, r["state_mb"].get<double>());
  }
  char line[256];
  std::snprintf(line, sizeof(line), "| %s | %s | %.3f | %.0f | %.2fx | %.0f | %.1f |", model.c_str(), what.c_str(),
                seconds, tokens / seconds, baseline_seconds / seconds, rss, state);
  std::cout << line << std::endl;
}

int run_driver(const Args& a, const std::string& self) {
  fs::create_directories(a.work);
  std::vector<int64_t> worlds;
  std::stringstream list(a.ranks);
  for (std::string item; std::getline(list, item, ',');) worlds.push_back(std::stoll(item));
  const double tokens = static_cast<double>(a.batch * (a.prompt + a.response));
  std::cout << "global batch " << a.batch << " x " << a.prompt + a.response << " tokens, " << a.steps
            << " timed steps after 1 warm-up (fastest reported), " << a.threads << " threads shared by the ranks\n\n"
            << "| model | run | step s | tokens/s | speed vs baseline | peak RSS/rank MB | train state/rank MB |\n"
            << "|---|---|---|---|---|---|---|" << std::endl;
  for (const std::string& spec : a.models) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) throw ConfigError("--model takes NAME=DIR, got '" + spec + "'");
    const std::string name = spec.substr(0, eq);
    const std::string dir = spec.substr(eq + 1);
    const auto baseline = spawn_processes(self, a, dir, "baseline", 1);
    const double base_seconds = baseline[0]["seconds"].get<double>();
    print_row(name, "unsharded baseline (1 process)", baseline, tokens, base_seconds);
    for (int64_t world : worlds)
      print_row(name, "fsdp " + std::to_string(world) + " rank(s)", spawn_processes(self, a, dir, "rank", world), tokens,
                base_seconds);
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
      "steps", po::value(&a.steps), "timed steps (default 3)")("batch", po::value(&a.batch), "global rows (default 8)")(
      "prompt", po::value(&a.prompt), "prompt tokens per row (default 32)")(
      "response", po::value(&a.response), "response tokens per row (default 32)")(
      "micro", po::value(&a.micro), "micro-batch rows (0: all; default 0)")(
      "threads", po::value(&a.threads), "intra-op threads, split among the ranks (default 2)")(
      "work", po::value(&a.work), "directory for per-process results")(
      "role", po::value(&a.role), "internal")("model-dir", po::value(&a.model_dir), "internal")(
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
    if (a.work.empty()) a.work = (fs::temp_directory_path() / ("bench_train_fsdp_" + std::to_string(::getpid()))).string();
    return rlcore::run_driver(a, fs::canonical("/proc/self/exe").string());
  } catch (const std::exception& e) {
    std::cerr << "bench_train_fsdp: " << e.what() << "\n";
    return 1;
  }
}
