// bench_long_sequences: the `fsdp` engine on ragged and on long sequences.
//
// 1. Ragged batches (long-tailed response lengths, mean well under the
//    maximum): real tokens per second of the train step and of the log-prob
//    pass, micro-batches packed without padding (use_remove_padding) vs padded
//    to the longest row, in one process, same batch, same run.
// 2. Long sequences: one row of L tokens trained with Ulysses sequence
//    parallelism over 1 and 2 processes (ulysses_sequence_parallel_size 1, 2;
//    the same cores: 2 threads, or 1 per process): each rank's peak resident
//    memory over what it held before the step, the step time, and the longest
//    L whose peak fits --budget-mb.
// Prints markdown tables (docs/trainer.md#packing, docs/train-fsdp.md#sequence-parallelism).
//
//   bench_long_sequences --model DIR [--rows 32] [--prompt 64] [--response 512] [--mean-response 96]
//                        [--micro 8] [--steps 3] [--lengths 1024,2048,4096,8192] [--budget-mb 1024] [--threads 2]
// Internally it re-runs itself with --role rank for each process of part 2.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "bench_processes.h"
#include "fsdp_engine.h"
#include "rlcore/core/runtime/process_groups.h"
#include "rlcore/error.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace rlcore {
namespace {

struct Args {
  std::string model;
  int64_t rows = 32;
  int64_t prompt = 64;
  int64_t response = 512;
  int64_t mean_response = 96;
  int64_t micro = 8;
  int64_t steps = 3;
  std::string lengths = "1024,2048,4096,8192";
  double budget_mb = 1024;
  int threads = 2;
  std::string work;
  // Internal (one process of part 2).
  std::string role;
  int64_t rank = 0;
  int64_t world = 1;
  int port = 0;
  int64_t length = 0;
  std::string result;
};

LossOutput pg_loss(const Batch& rows, const ModelOutput& out, const GlobalBatchInfo& global) {
  const at::Tensor mask = rows.tensor("response_mask");
  const at::Tensor loss =
      -(out.log_prob * rows.tensor("advantages") * mask).sum() * (global.dp_size / global.num_tokens);
  return LossOutput{loss, {}};
}

// verl's layout: prompts left-padded to `prompt`, responses right-padded to `response`.
Batch padded_batch(const std::vector<int64_t>& prompts, const std::vector<int64_t>& responses, int64_t prompt,
                   int64_t response, int64_t vocab) {
  const auto rows = static_cast<int64_t>(prompts.size());
  at::Tensor mask = at::zeros({rows, prompt + response}, at::kLong);
  for (int64_t r = 0; r < rows; ++r) {
    mask[r].slice(0, prompt - prompts[r], prompt).fill_(1);
    mask[r].slice(0, prompt, prompt + responses[r]).fill_(1);
  }
  const at::Tensor ids =
      (at::arange(rows * (prompt + response), at::kLong).view_as(mask) * 7919 + 17) % (vocab - 1) + 1;
  Batch batch(rows);
  batch.set("input_ids", ids * mask);
  batch.set("attention_mask", mask);
  batch.set("responses", (ids * mask).slice(1, prompt).clone());
  batch.set("response_mask", mask.slice(1, prompt).to(at::kFloat));
  batch.set("advantages", at::sin(at::arange(rows * response, at::kFloat)).view({rows, response}));
  return batch;
}

// Long-tailed lengths: exponential with the given mean, clipped to [1, most]; seeded.
std::vector<int64_t> long_tailed(int64_t n, double mean, int64_t most, uint32_t seed) {
  std::mt19937 gen(seed);
  std::exponential_distribution<double> dist(1.0 / mean);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(std::clamp<int64_t>(std::llround(dist(gen)), 1, most));
  return out;
}

std::string fixed(double value, int digits) {
  std::ostringstream text;
  text.setf(std::ios::fixed);
  text.precision(digits);
  text << value;
  return text.str();
}

void ragged_table(const Args& a) {
  at::set_num_threads(a.threads);
  ComponentContext context;
  context.model_path = a.model;
  std::map<bool, std::unique_ptr<train_fsdp::FsdpEngine>> engines;
  for (const bool packed : {false, true}) {
    train_fsdp::FsdpOptions options;
    options.use_remove_padding = packed;
    engines[packed] = std::make_unique<train_fsdp::FsdpEngine>(options, context);
  }
  const int64_t vocab = engines[true]->model_config().vocab_size;
  std::vector<int64_t> prompts = long_tailed(a.rows, a.prompt / 2.0, a.prompt, 1);
  const std::vector<int64_t> responses = long_tailed(a.rows, static_cast<double>(a.mean_response), a.response, 2);
  double mean = 0;
  int64_t longest = 0;
  for (const int64_t r : responses) {
    mean += static_cast<double>(r) / static_cast<double>(a.rows);
    longest = std::max(longest, r);
  }
  ForwardOptions forward;
  forward.micro_batching.micro_batch_size = a.micro;
  std::cout << "\n### Ragged batch: packed vs padded micro-batches (1 process, " << a.threads << " threads)\n\n"
            << a.rows << " rows, micro-batches of " << a.micro << ", prompts up to " << a.prompt
            << " tokens (left-padded), responses up to " << a.response << " (long-tailed: mean " << fixed(mean, 1)
            << ", longest " << longest << "). Padded to the response length (as the rollout returns rows) and, "
            << "more favourable to padding, to the batch's longest response.\n\n"
            << "| responses padded to | pass | real tokens | padded (s) | packed (s) | padded real tokens/s | "
               "packed real tokens/s | packed / padded |\n"
            << "|---|---|---:|---:|---:|---:|---:|---:|\n";
  for (const int64_t width : {a.response, longest}) {
    const Batch batch = padded_batch(prompts, responses, a.prompt, width, vocab);
    const double real = batch.tensor("attention_mask").sum().item<double>();
    const auto row = [&](const std::string& pass, auto run) {
      const double padded = bench::time_steps(a.steps, at::kCPU, [&] { run(*engines[false]); });
      const double packed = bench::time_steps(a.steps, at::kCPU, [&] { run(*engines[true]); });
      std::cout << "| " << width << " ("
                << fixed(100.0 * real / static_cast<double>(batch.tensor("attention_mask").numel()), 0) << "% real) | "
                << pass << " | " << static_cast<int64_t>(real) << " | " << fixed(padded, 3) << " | " << fixed(packed, 3)
                << " | " << fixed(real / padded, 0) << " | " << fixed(real / packed, 0) << " | "
                << fixed(padded / packed, 2) << "x |" << std::endl;
    };
    row("log-prob pass", [&](train_fsdp::FsdpEngine& e) { e.forward(batch, forward); });
    row("train step", [&](train_fsdp::FsdpEngine& e) { e.train_step(batch, forward, pg_loss); });
  }
}

int run_rank(const Args& a) {
  at::set_num_threads(a.threads);
  runtime::MeshShape mesh;
  if (a.world > 1) mesh = {runtime::MeshDim{"dp", 1, {}}, runtime::MeshDim{"sp", a.world, {}}};
  const std::unique_ptr<CommContext> comm =
      bench::loopback_comm(a.port, "bench_long_sequences", a.rank, a.world, std::move(mesh));
  ComponentContext context;
  context.model_path = a.model;
  context.comm = comm.get();
  train_fsdp::FsdpOptions options;
  options.ulysses_sequence_parallel_size = a.world;
  train_fsdp::FsdpEngine engine(options, context);
  const int64_t prompt = 16;
  const Batch batch =
      padded_batch({prompt}, {a.length - prompt}, prompt, a.length - prompt, engine.model_config().vocab_size);
  // One step first: its one-off allocations (the AdamW state) stay out of the peak.
  std::map<std::string, double> metrics = engine.train_step(batch, {}, pg_loss).metrics;
  const double before_mb = bench::current_rss_mb();
  bench::reset_peak_rss();
  const double seconds =
      bench::time_steps(a.steps, at::kCPU, [&] { metrics = engine.train_step(batch, {}, pg_loss).metrics; });
  std::ofstream(a.result) << nlohmann::json{{"seconds", seconds},
                                            {"peak_over_start_mb", bench::peak_since_reset_mb() - before_mb},
                                            {"activations_mb", metrics.at("activations_gb") * 1024.0}}
                                 .dump();
  return 0;
}

std::vector<nlohmann::json> run_sequence_parallel(const Args& a, const std::string& self, int64_t sp, int64_t length) {
  runtime::RendezvousStore store("127.0.0.1", 0, std::chrono::minutes(10));
  std::vector<std::vector<std::string>> args;
  std::vector<std::string> results;
  const int threads = std::max(1, a.threads / static_cast<int>(sp));
  for (int64_t rank = 0; rank < sp; ++rank) {
    results.push_back((fs::path(a.work) / ("sp" + std::to_string(sp) + "_" + std::to_string(length) + "_" +
                                           std::to_string(rank) + ".json"))
                          .string());
    args.push_back({"--role", "rank", "--model", a.model, "--rank", std::to_string(rank), "--world", std::to_string(sp),
                    "--port", std::to_string(store.port()), "--length", std::to_string(length), "--steps",
                    std::to_string(a.steps), "--threads", std::to_string(threads), "--result", results.back()});
  }
  bench::run_processes(self, args, threads, "bench_long_sequences sp=" + std::to_string(sp));
  std::vector<nlohmann::json> out;
  for (const std::string& path : results) out.push_back(nlohmann::json::parse(std::ifstream(path)));
  return out;
}

void sequence_parallel_table(const Args& a, const std::string& self) {
  fs::create_directories(a.work);
  std::vector<int64_t> lengths;
  std::stringstream list(a.lengths);
  for (std::string item; std::getline(list, item, ',');) lengths.push_back(std::stoll(item));
  std::cout << "\n### One long row: Ulysses sequence parallelism over 1 and 2 processes (" << a.threads
            << " threads in all)\n\n"
            << "Per rank: peak resident memory over what the rank held before the step, the layer inputs kept for "
               "the backward (`activations_gb`), and the step time.\n\n"
            << "| tokens | SP=1 peak (MB) | SP=2 peak per rank (MB) | ratio | SP=1 kept (MB) | SP=2 kept per rank (MB) "
               "| SP=1 step (s) | SP=2 step (s) |\n"
            << "|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  std::map<int64_t, int64_t> longest;  // sp -> the longest length within the budget
  for (const int64_t length : lengths) {
    std::map<int64_t, nlohmann::json> worst;  // sp -> the rank with the highest peak
    for (const int64_t sp : {1, 2}) {
      for (const nlohmann::json& rank : run_sequence_parallel(a, self, sp, length)) {
        if (!worst.count(sp) || rank["peak_over_start_mb"] > worst[sp]["peak_over_start_mb"]) worst[sp] = rank;
      }
      if (worst[sp]["peak_over_start_mb"].get<double>() <= a.budget_mb) longest[sp] = length;
    }
    const auto value = [&](int64_t sp, const char* key) { return worst[sp][key].get<double>(); };
    std::cout << "| " << length << " | " << fixed(value(1, "peak_over_start_mb"), 0) << " | "
              << fixed(value(2, "peak_over_start_mb"), 0) << " | "
              << fixed(value(2, "peak_over_start_mb") / value(1, "peak_over_start_mb"), 2) << " | "
              << fixed(value(1, "activations_mb"), 1) << " | " << fixed(value(2, "activations_mb"), 1) << " | "
              << fixed(value(1, "seconds"), 3) << " | " << fixed(value(2, "seconds"), 3) << " |" << std::endl;
  }
  std::cout << "\nLongest row within a " << fixed(a.budget_mb, 0) << " MB peak per rank: SP=1 "
            << (longest.count(1) ? std::to_string(longest[1]) : std::string("none of these")) << " tokens, SP=2 "
            << (longest.count(2) ? std::to_string(longest[2]) : std::string("none of these")) << " tokens.\n";
}

Args parse(int argc, char** argv) {
  Args a;
  po::options_description options("bench_long_sequences");
  options.add_options()("model", po::value(&a.model)->required(), "HF checkpoint directory")(
      "rows", po::value(&a.rows))("prompt", po::value(&a.prompt))("response", po::value(&a.response))(
      "mean-response", po::value(&a.mean_response))("micro", po::value(&a.micro))("steps", po::value(&a.steps))(
      "lengths", po::value(&a.lengths))("budget-mb", po::value(&a.budget_mb))("threads", po::value(&a.threads))(
      "work", po::value(&a.work))("role", po::value(&a.role))("rank", po::value(&a.rank))("world", po::value(&a.world))(
      "port", po::value(&a.port))("length", po::value(&a.length))("result", po::value(&a.result));
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, options), vm);
  po::notify(vm);
  if (a.work.empty()) a.work = (fs::temp_directory_path() / "bench_long_sequences").string();
  return a;
}

}  // namespace
}  // namespace rlcore

int main(int argc, char** argv) {
  try {
    const rlcore::Args a = rlcore::parse(argc, argv);
    if (a.role == "rank") return rlcore::run_rank(a);
    rlcore::ragged_table(a);
    rlcore::sequence_parallel_table(a, fs::canonical("/proc/self/exe").string());
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_long_sequences: " << e.what() << "\n";
    return 1;
  }
}
