// bench_generation: tokens/s and ms per decode step of the `native` inference
// engine against the eager-PyTorch baseline (bench/python/generate_baseline.py),
// with the memory-bandwidth floor of a decode step. Prints markdown tables.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "memory_reference.h"
#include "python_baseline.h"
#include "rlcore/config_node.h"
#include "rlcore/core/session.h"
#include "rlcore/elapsed_seconds.h"
#include "rlcore/error.h"
#include "rlcore/inference_engine.h"
#include "rlcore/model/config.h"
#include "rlcore/model/cpu_kernels.h"
#include "../tests/common/test_paths.h"

namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;

namespace rlcore {
namespace {

struct BenchOptions {
  std::vector<std::pair<std::string, std::string>> models;  // (table name, checkpoint dir)
  std::vector<std::string> dtypes;
  std::vector<int64_t> batches;
  int64_t prompt_len = 32;
  int64_t max_tokens = 128;
  int threads = 2;
  int repeats = 3;
  std::string python;           // empty: no baseline
  std::string baseline_script;  // generate_baseline.py
  int64_t bandwidth_mib = 512;
  std::vector<std::string> plugin_paths;
  std::string device = "cpu";  // the engine's (and the baseline's) device
  bool generic_cpu_kernels = false;
  bool cuda_graphs = false;  // also time the engine with enforce_eager: false
};

// One implementation's numbers for one (model, dtype, batch).
struct Timing {
  double prefill_s = 0;  // prefill + first token
  double total_s = 0;    // max_tokens tokens
  double ms_per_step = 0;
  double tokens_per_s = 0;
  std::vector<int32_t> row0_tokens;
};

struct Row {
  std::string model;
  std::string dtype;
  int64_t batch = 0;
  Timing rlcore;
  std::optional<Timing> graphs;  // rlcore with its decode steps replayed as CUDA graphs
  std::string graphs_error;      // why that run failed (the other columns and benchmarks still run)
  std::optional<Timing> python;
  double weight_bytes = 0;  // read once per decode step
  double kv_bytes = 0;      // KV cache read per decode step, mean over the steps
};

// Must match prompt_token() in bench/python/generate_baseline.py.
int32_t prompt_token(int64_t row, int64_t position, int64_t vocab_size) {
  return static_cast<int32_t>((row * 7919 + position * 131 + 17) % vocab_size);
}

std::vector<std::vector<int32_t>> make_prompts(int64_t batch, int64_t len, int64_t vocab_size) {
  std::vector<std::vector<int32_t>> prompts(batch);
  for (int64_t r = 0; r < batch; ++r)
    for (int64_t t = 0; t < len; ++t) prompts[r].push_back(prompt_token(r, t, vocab_size));
  return prompts;
}

// The memory references a decode step is measured against, in bytes per second.
struct Bandwidth {
  double read = 0;  // streaming reads only: the floor of a step that reads its weights
  double copy = 0;  // memcpy, bytes copied: for comparison with earlier tables
};

Bandwidth measure_bandwidth(int64_t bytes) {
  return {bench::read_gbps(bytes, 5) * 1e9, bench::memcpy_gbps(bytes, 5, /*fresh=*/false) * 1e9};
}

double timed_generate(InferenceEngine& engine, const std::vector<std::vector<int32_t>>& prompts,
                      const SamplingParams& sampling, GenerationOutput* out) {
  const auto start = Clock::now();
  GenerationOutput result = engine.generate(prompts, sampling);
  const double elapsed = seconds_since(start);
  for (size_t i = 0; i < result.token_ids.size(); ++i) {
    if (static_cast<int64_t>(result.token_ids[i].size()) != sampling.max_tokens) {
      throw ValueError("bench_generation: sequence " + std::to_string(i) + " has " +
                       std::to_string(result.token_ids[i].size()) + " tokens, expected " +
                       std::to_string(sampling.max_tokens) + " (no stop tokens were given)");
    }
  }
  if (out != nullptr) *out = std::move(result);
  return elapsed;
}

// Best-of-repeats generate(max_tokens) and generate(1) (prefill + first
// token); the difference spread over max_tokens - 1 steps is ms/step, defined
// as the Python baseline defines it.
Timing time_engine(InferenceEngine& engine, const std::vector<std::vector<int32_t>>& prompts,
                   const BenchOptions& options) {
  SamplingParams sampling;
  sampling.temperature = 0.0;  // greedy
  sampling.max_tokens = std::min<int64_t>(4, options.max_tokens);
  timed_generate(engine, prompts, sampling, nullptr);  // warm-up
  Timing timing;
  timing.prefill_s = timing.total_s = std::numeric_limits<double>::max();
  for (int i = 0; i < options.repeats; ++i) {
    sampling.max_tokens = 1;
    timing.prefill_s = std::min(timing.prefill_s, timed_generate(engine, prompts, sampling, nullptr));
    sampling.max_tokens = options.max_tokens;
    GenerationOutput out;
    const double total = timed_generate(engine, prompts, sampling, &out);
    if (total < timing.total_s) {
      timing.total_s = total;
      timing.row0_tokens = out.token_ids.front();
    }
  }
  const int64_t steps = options.max_tokens - 1;
  timing.ms_per_step = steps > 0 ? 1000.0 * std::max(0.0, timing.total_s - timing.prefill_s) / steps : 0.0;
  timing.tokens_per_s = static_cast<double>(prompts.size() * options.max_tokens) / timing.total_s;
  return timing;
}

// Runs the baseline for one configuration; nullopt (with a warning) if it fails.
std::optional<Timing> time_python(const std::string& model_dir, const std::string& dtype, int64_t batch,
                                  const BenchOptions& options) {
  using bench::shell_quote;
  const std::string command = shell_quote(options.python) + " " + shell_quote(options.baseline_script) + " --model " +
                              shell_quote(model_dir) + " --dtype " + dtype + " --batches " + std::to_string(batch) +
                              " --prompt-len " + std::to_string(options.prompt_len) + " --max-tokens " +
                              std::to_string(options.max_tokens) + " --threads " + std::to_string(options.threads) +
                              " --repeats " + std::to_string(options.repeats) +
                              (options.device == "cpu" ? "" : " --device " + shell_quote(options.device));
  const std::optional<nlohmann::json> output = bench::run_python_json(command, "bench_generation");
  if (!output) return std::nullopt;
  try {
    const nlohmann::json& result = output->at("results").at(0);
    Timing timing;
    timing.prefill_s = result.at("prefill_s").get<double>();
    timing.total_s = result.at("total_s").get<double>();
    timing.ms_per_step = result.at("ms_per_step").get<double>();
    timing.tokens_per_s = result.at("tokens_per_s").get<double>();
    timing.row0_tokens = result.at("row0_tokens").get<std::vector<int32_t>>();
    return timing;
  } catch (const std::exception& e) {
    std::cerr << "bench_generation: baseline output unreadable (" << e.what() << "): " << command << "\n";
    return std::nullopt;
  }
}

// Weight bytes one decode step of `batch` rows reads: every matrix once, but of
// an untied embedding table only the rows looked up (a tied one is read whole
// as the output projection).
double weight_bytes(const InferenceEngine& engine, int64_t batch) {
  const std::vector<WeightMeta> metas = engine.weight_meta();
  const bool tied =
      std::none_of(metas.begin(), metas.end(), [](const WeightMeta& m) { return m.name == "lm_head.weight"; });
  double total = 0;
  for (const WeightMeta& meta : metas) {
    double count = 1;
    for (int64_t d : meta.shape) count *= static_cast<double>(d);
    if (meta.name == "model.embed_tokens.weight" && !tied && meta.shape.size() == 2) {
      count = static_cast<double>(std::min<int64_t>(batch, meta.shape[0]) * meta.shape[1]);
    }
    total += count * static_cast<double>(c10::elementSize(meta.dtype));
  }
  return total;
}

// Keys and values read by one decode step, averaged over the steps (the cache
// grows from prompt_len + 1 to prompt_len + max_tokens - 1 slots).
double mean_kv_bytes(const model::ModelConfig& config, at::ScalarType dtype, int64_t batch,
                     const BenchOptions& options) {
  const double mean_slots = static_cast<double>(options.prompt_len) + options.max_tokens / 2.0;
  return 2.0 * config.num_hidden_layers * batch * config.num_key_value_heads * config.head_dim * mean_slots *
         static_cast<double>(c10::elementSize(dtype));
}

std::vector<Row> run_benchmarks(Session& session, const BenchOptions& options) {
  std::vector<Row> rows;
  const int64_t max_batch = *std::max_element(options.batches.begin(), options.batches.end());
  for (const auto& [name, dir] : options.models) {
    const model::ModelConfig config = model::ModelConfig::from_file(dir + "/config.json");
    for (const std::string& dtype : options.dtypes) {
      const std::string engine_yaml = "dtype: " + dtype +
                                      "\nmax_model_len: " + std::to_string(options.prompt_len + options.max_tokens) +
                                      "\nmax_num_seqs: " + std::to_string(max_batch) + "\n";
      const auto make_engine = [&](const std::string& extra) {
        const ConfigNode engine_options = ConfigNode::parse(engine_yaml + extra, "bench_generation engine options");
        return session.registry().create<InferenceEngine>("native", engine_options,
                                                          ComponentContext{options.device, dir});
      };
      const auto engine = make_engine("enforce_eager: true\n");  // the rlcore columns: eager decode steps
      const auto graphed = options.cuda_graphs ? make_engine("enforce_eager: false\n") : nullptr;
      const at::ScalarType scalar_type = dtype == "bfloat16" ? at::kBFloat16 : at::kFloat;
      for (int64_t batch : options.batches) {
        std::cerr << "bench_generation: " << name << " " << dtype << " batch " << batch << "\n";
        Row row;
        row.model = name;
        row.dtype = dtype;
        row.batch = batch;
        const auto prompts = make_prompts(batch, options.prompt_len, config.vocab_size);
        row.rlcore = time_engine(*engine, prompts, options);
        if (graphed) {
          try {
            row.graphs = time_engine(*graphed, prompts, options);
          } catch (const Error& e) {
            row.graphs_error = e.what();
          }
        }
        if (!options.python.empty()) row.python = time_python(dir, dtype, batch, options);
        row.weight_bytes = weight_bytes(*engine, batch);
        row.kv_bytes = mean_kv_bytes(config, scalar_type, batch, options);
        rows.push_back(std::move(row));
      }
    }
  }
  return rows;
}

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

int64_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const auto mismatch = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<int64_t>(mismatch.first - a.begin());
}

void print_floor_table(const std::vector<Row>& rows, const Bandwidth& bandwidth, const BenchOptions& options);

// Which decode kernels ran: what the CPU offers and how many calls took each path.
void print_cpu_kernels() {
  const model::CpuKernelSupport support = model::cpu_kernel_support();
  std::cout << "\nCPU decode kernels (this CPU: AVX-512 " << (support.avx512 ? "yes" : "no") << ", AVX512-BF16 "
            << (support.avx512_bf16 ? "yes" : "no") << (model::generic_cpu_kernels() ? "; generic forced" : "")
            << "), calls by path over the whole run:\n\n| kernel | AVX-512 | ATen |\n|---|---:|---:|\n";
  for (const auto& [name, kernel] :
       {std::pair{"GEMV fp32", model::CpuKernel::kGemvFloat}, std::pair{"GEMV bf16", model::CpuKernel::kGemvBFloat16},
        std::pair{"decode attention", model::CpuKernel::kDecodeAttention}}) {
    const model::CpuKernelCounts counts = model::cpu_kernel_counts(kernel);
    std::cout << "| " << name << " | " << counts.avx512 << " | " << counts.aten << " |\n";
  }
}

void print_tables(const std::vector<Row>& rows, const Bandwidth& bandwidth, const BenchOptions& options) {
  std::cout << "### Generation speed (" << options.device << ", prompt " << options.prompt_len << ", "
            << options.max_tokens << " new tokens, greedy, " << options.threads << " threads, best of "
            << options.repeats << ")\n\n"
            << "| model | dtype | batch | rlcore tok/s | rlcore ms/step | "
            << (options.cuda_graphs ? "graphs tok/s | graphs ms/step | " : "")
            << "python tok/s | python ms/step | ratio (rlcore/python) |\n"
            << "|---|---|---:|---:|---:|" << (options.cuda_graphs ? "---:|---:|" : "") << "---:|---:|---:|\n";
  for (const Row& row : rows) {
    std::cout << "| " << row.model << " | " << row.dtype << " | " << row.batch << " | "
              << fixed(row.rlcore.tokens_per_s, 1) << " | " << fixed(row.rlcore.ms_per_step, 2) << " | ";
    if (row.graphs) {
      std::cout << fixed(row.graphs->tokens_per_s, 1) << " | " << fixed(row.graphs->ms_per_step, 2) << " | ";
    } else if (options.cuda_graphs) {
      std::cout << "failed | failed | ";
    }
    if (row.python) {
      std::cout << fixed(row.python->tokens_per_s, 1) << " | " << fixed(row.python->ms_per_step, 2) << " | "
                << fixed(row.rlcore.tokens_per_s / row.python->tokens_per_s, 2) << "x |\n";
    } else {
      std::cout << "n/a | n/a | n/a |\n";
    }
  }
  std::cout << "\nrlcore: enforce_eager: true (eager decode steps); ratio = rlcore tok/s / python tok/s (higher is "
               "better for rlcore)"
            << (options.cuda_graphs ? "; graphs: rlcore with enforce_eager: false (decode steps replayed as CUDA "
                                      "graphs)"
                                    : "")
            << ". Greedy tokens of row 0, rlcore vs python (first mismatch shows numerical drift, not a bug by "
               "itself):";
  for (const Row& row : rows) {
    if (!row.python) continue;
    std::cout << " " << row.model << "/" << row.dtype << "/" << row.batch << " "
              << common_prefix(row.rlcore.row0_tokens, row.python->row0_tokens) << "/" << options.max_tokens << ";";
  }
  std::cout << "\n";
  if (options.cuda_graphs) {
    std::cout << "\nGreedy tokens of row 0, graphs vs eager rlcore (the same unless the kernels round differently):";
    for (const Row& row : rows) {
      if (!row.graphs) continue;
      std::cout << " " << row.model << "/" << row.dtype << "/" << row.batch << " "
                << common_prefix(row.graphs->row0_tokens, row.rlcore.row0_tokens) << "/" << options.max_tokens << ";";
    }
    std::cout << "\n";
    for (const Row& row : rows) {
      if (row.graphs_error.empty()) continue;
      std::cout << "\ngraphs failed for " << row.model << "/" << row.dtype << "/" << row.batch << ": "
                << row.graphs_error << "\n";
    }
  }
  // The floor is the host's read bandwidth: it says nothing of a GPU's step.
  if (options.device == "cpu") print_floor_table(rows, bandwidth, options);
}

void print_floor_table(const std::vector<Row>& rows, const Bandwidth& bandwidth, const BenchOptions& options) {
  std::cout << "\n### Memory-bandwidth floor of a decode step\n\n"
            << "read bandwidth: " << fixed(bandwidth.read / 1e9, 2) << " GB/s (sum of " << options.bandwidth_mib
            << " MiB, " << at::get_num_threads() << " threads, best of 5; memcpy: " << fixed(bandwidth.copy / 1e9, 2)
            << " GB/s copied); floor = bytes read per step / read bandwidth. The bandwidth is DRAM's: a model "
               "that fits in the CPU caches (tiny: 3.3 MB) can step faster than its floor.\n\n"
            << "| model | dtype | batch | weights MB/step | KV MB/step (mean) | floor ms (weights) | "
               "floor ms (weights+KV) | rlcore ms/step | rlcore / floor | python ms/step | python / floor |\n"
            << "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const Row& row : rows) {
    const double floor_ms = 1000.0 * row.weight_bytes / bandwidth.read;
    const double floor_kv_ms = 1000.0 * (row.weight_bytes + row.kv_bytes) / bandwidth.read;
    std::cout << "| " << row.model << " | " << row.dtype << " | " << row.batch << " | "
              << fixed(row.weight_bytes / 1e6, 1) << " | " << fixed(row.kv_bytes / 1e6, 1) << " | "
              << fixed(floor_ms, 3) << " | " << fixed(floor_kv_ms, 3) << " | " << fixed(row.rlcore.ms_per_step, 2)
              << " | " << fixed(row.rlcore.ms_per_step / floor_ms, 1) << "x | ";
    if (row.python) {
      std::cout << fixed(row.python->ms_per_step, 2) << " | " << fixed(row.python->ms_per_step / floor_ms, 1)
                << "x |\n";
    } else {
      std::cout << "n/a | n/a |\n";
    }
  }
}

template <class T>
std::vector<T> split_list(const std::string& text, const std::string& option) {
  std::vector<T> out;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    std::stringstream parse(item);
    T value;
    if (!(parse >> value) || !parse.eof()) throw ConfigError("--" + option + ": cannot parse '" + item + "'");
    out.push_back(value);
  }
  if (out.empty()) throw ConfigError("--" + option + " is empty");
  return out;
}

// Returns nullopt after --help.
std::optional<BenchOptions> parse_options(int argc, char** argv) {
  BenchOptions options;
  std::vector<std::string> models;
  std::string dtypes = "float32,bfloat16";
  std::string batches = "1,8,64";
  std::string cpu_kernels = "auto";
  options.baseline_script = rlcore_test::source_dir() + "/bench/python/generate_baseline.py";
  po::options_description desc(
      "bench_generation --model NAME=DIR [--model NAME=DIR ...] [options]\n"
      "Times the `native` inference engine (and, with --python, the eager-PyTorch baseline) on HF "
      "checkpoint directories; bench/run_generation_bench.sh runs it end to end");
  desc.add_options()("help,h", "this help")("model", po::value(&models)->required(),
                                            "NAME=DIR: a table name and an HF checkpoint directory")(
      "dtypes", po::value(&dtypes), "comma-separated: float32,bfloat16")(
      "batches", po::value(&batches), "comma-separated batch sizes (default 1,8,64)")(
      "prompt-len", po::value(&options.prompt_len), "prompt tokens (default 32)")(
      "max-tokens", po::value(&options.max_tokens), "new tokens per sequence (default 128)")(
      "threads", po::value(&options.threads), "intra-op threads of both implementations (default 2)")(
      "repeats", po::value(&options.repeats), "timed runs per configuration; the best is reported (default 3)")(
      "python", po::value(&options.python),
      "python with torch for the baseline (e.g. /usr/bin/python3); "
      "none: rlcore only")("baseline-script", po::value(&options.baseline_script), "the baseline script")(
      "bandwidth-mib", po::value(&options.bandwidth_mib),
      "buffer size for the read and memcpy bandwidths (default 512)")("plugins", po::value(&options.plugin_paths),
                                                                      "extra plugin directories")(
      "device", po::value(&options.device),
      "the engine's device, cpu or cuda[:N]; the baseline runs there too (default cpu; on a GPU use "
      "--baseline-script bench/python/hf_generate_baseline.py)")(
      "cpu-kernels", po::value(&cpu_kernels), "auto (AVX-512 where the CPU has it) or generic (the ATen ops)")(
      "cuda-graphs", po::bool_switch(&options.cuda_graphs),
      "also time the engine with enforce_eager: false (decode steps replayed as CUDA graphs; --device cuda)");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return std::nullopt;
  }
  po::notify(vm);
  if (options.python == "none") options.python.clear();  // documented: rlcore only
  if (cpu_kernels != "auto" && cpu_kernels != "generic")
    throw ConfigError("--cpu-kernels: '" + cpu_kernels + "' is neither auto nor generic");
  options.generic_cpu_kernels = cpu_kernels == "generic";
  if (options.cuda_graphs && options.device.rfind("cuda", 0) != 0)
    throw ConfigError("--cuda-graphs needs --device cuda: graphs are recorded on a GPU only");
  for (const std::string& model : models) {
    const auto eq = model.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == model.size())
      throw ConfigError("--model '" + model + "': expected NAME=DIR");
    options.models.emplace_back(model.substr(0, eq), model.substr(eq + 1));
  }
  options.dtypes = split_list<std::string>(dtypes, "dtypes");
  for (const std::string& dtype : options.dtypes) {
    if (dtype != "float32" && dtype != "bfloat16")
      throw ConfigError("--dtypes: unknown dtype '" + dtype + "' (float32, bfloat16)");
  }
  options.batches = split_list<int64_t>(batches, "batches");
  for (int64_t batch : options.batches) {
    if (batch < 1) throw ConfigError("--batches: batch size must be >= 1, got " + std::to_string(batch));
  }
  if (options.prompt_len < 1 || options.max_tokens < 1 || options.threads < 1 || options.repeats < 1 ||
      options.bandwidth_mib < 1) {
    throw ConfigError("--prompt-len, --max-tokens, --threads, --repeats and --bandwidth-mib must be >= 1");
  }
  return options;
}

int run(int argc, char** argv) {
  const std::optional<BenchOptions> options = parse_options(argc, argv);
  if (!options) return 0;
  at::set_num_threads(options->threads);
  model::set_generic_cpu_kernels(options->generic_cpu_kernels);
  Session session(options->plugin_paths);
  const Bandwidth bandwidth = options->device == "cpu" ? measure_bandwidth(options->bandwidth_mib << 20) : Bandwidth{};
  const std::vector<Row> rows = run_benchmarks(session, *options);
  print_tables(rows, bandwidth, *options);
  if (options->device == "cpu") print_cpu_kernels();
  return 0;
}

}  // namespace
}  // namespace rlcore

int main(int argc, char** argv) {
  try {
    return rlcore::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "bench_generation: " << e.what() << "\n";
    return 1;
  }
}
