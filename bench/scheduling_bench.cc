// bench_scheduling: what continuous batching and shared prefill buy infer-native
// (issue 36), each measured against its baseline in the same run.
//   long-tailed: requests where most stop early and a few run long, through
//     GeneratesRequests with continuous batching vs static batching (a batch
//     runs to its end before waiting requests start), same max_num_seqs.
//   shared prefill: GRPO-shaped generate() (prompts x n) with one prefill per
//     prompt vs one per sample (enable_prefix_caching), max_tokens 1 so the
//     time is the prefill's.
// Prints markdown tables with the machine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <boost/program_options.hpp>

#include "native_engine.h"
#include "rlcore/elapsed_seconds.h"
#include "rlcore/error.h"

namespace po = boost::program_options;

namespace rlcore {
namespace {

using infer_native::NativeEngine;
using infer_native::NativeEngineOptions;

struct BenchOptions {
  std::string model;
  std::string dtype = "auto";  // infer-native's: auto is the checkpoint's torch_dtype
  int threads = 2;
  int repeats = 2;
  // long-tailed
  int64_t requests = 64;
  int64_t short_tokens = 32;
  int64_t long_tokens = 512;
  int64_t long_every = 10;  // every 10th request is long: 10%
  int64_t max_num_seqs = 16;
  // shared prefill
  int64_t prompts = 64;
  int64_t n = 8;
  int64_t prompt_len = 256;
};

NativeEngine make_engine(const BenchOptions& options, NativeEngineOptions engine_options) {
  engine_options.dtype = options.dtype;
  ComponentContext context;
  context.model_path = options.model;
  return NativeEngine(engine_options, context);
}

std::vector<int32_t> prompt_of(int64_t length, int64_t salt, int64_t vocab) {
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < length; ++t) ids.push_back(static_cast<int32_t>((salt * 131 + t * 17 + 7) % vocab));
  return ids;
}

struct Run {
  double seconds = 0;
  int64_t tokens = 0;
  int64_t steps = 0;
};

// Every request submitted at once; stepped until all have finished.
Run run_requests(NativeEngine& engine, const BenchOptions& options) {
  const int64_t vocab = engine.config().vocab_size;
  for (int64_t i = 0; i < options.requests; ++i) {
    GenerationRequest request;
    request.id = std::to_string(i);
    request.prompt_ids = prompt_of(16, i, vocab);
    request.sampling.temperature = 0;
    request.sampling.max_tokens =
        i % options.long_every == options.long_every - 1 ? options.long_tokens : options.short_tokens;
    engine.submit(request);
  }
  Run run;
  const auto start = std::chrono::steady_clock::now();
  while (engine.load().running + engine.load().waiting > 0) {
    for (const RequestOutput& out : engine.step().finished) run.tokens += static_cast<int64_t>(out.generated.size());
  }
  run.seconds = seconds_since(start);
  run.steps = engine.take_request_stats().steps;
  return run;
}

Run best_of(int repeats, const std::function<Run()>& once) {
  Run best;
  for (int r = 0; r < repeats; ++r) {
    const Run run = once();
    if (r == 0 || run.seconds < best.seconds) best = run;
  }
  return best;
}

void long_tailed(const BenchOptions& options) {
  std::printf(
      "\n### Long-tailed lengths: %lld requests, %lld%% at %lld tokens, the rest at %lld (greedy, no stop "
      "tokens), max_num_seqs %lld\n\n",
      static_cast<long long>(options.requests), static_cast<long long>(100 / options.long_every),
      static_cast<long long>(options.long_tokens), static_cast<long long>(options.short_tokens),
      static_cast<long long>(options.max_num_seqs));
  std::printf("| batching | time (s) | tokens | tokens/s | decode steps | x static |\n|---|---|---|---|---|---|\n");
  Run runs[2];
  for (bool static_batching : {true, false}) {
    NativeEngineOptions engine_options;
    engine_options.max_num_seqs = options.max_num_seqs;
    engine_options.static_batching = static_batching;
    engine_options.max_model_len = 16 + options.long_tokens;
    NativeEngine engine = make_engine(options, engine_options);
    runs[static_batching ? 0 : 1] = best_of(options.repeats, [&] { return run_requests(engine, options); });
  }
  for (int k = 0; k < 2; ++k) {
    const Run& run = runs[k];
    std::printf("| %s | %.2f | %lld | %.0f | %lld | %.2f |\n", k == 0 ? "static (baseline)" : "continuous", run.seconds,
                static_cast<long long>(run.tokens), run.tokens / run.seconds, static_cast<long long>(run.steps),
                (run.tokens / run.seconds) / (runs[0].tokens / runs[0].seconds));
  }
}

void shared_prefill(const BenchOptions& options) {
  std::printf("\n### Shared prefill: %lld prompts x n=%lld, prompt %lld tokens, max_tokens 1\n\n",
              static_cast<long long>(options.prompts), static_cast<long long>(options.n),
              static_cast<long long>(options.prompt_len));
  std::printf("| prefill | time (s) | prompt rows prefilled | x one per sample |\n|---|---|---|---|\n");
  double per_sample_s = 0;
  for (bool share : {false, true}) {
    NativeEngineOptions engine_options;
    engine_options.enable_prefix_caching = share;
    engine_options.max_num_seqs = options.prompts * options.n;
    NativeEngine engine = make_engine(options, engine_options);
    std::vector<std::vector<int32_t>> prompts;
    for (int64_t i = 0; i < options.prompts; ++i) {
      prompts.push_back(prompt_of(options.prompt_len, i, engine.config().vocab_size));
    }
    SamplingParams sampling;
    sampling.n = options.n;
    sampling.max_tokens = 1;
    sampling.seed = 1;
    int64_t rows = 0;
    const Run run = best_of(options.repeats, [&] {
      const auto start = std::chrono::steady_clock::now();
      engine.generate(prompts, sampling);
      Run r;
      r.seconds = seconds_since(start);
      rows = engine.last_decode_stats().prefill_rows;
      return r;
    });
    if (!share) per_sample_s = run.seconds;
    std::printf("| %s | %.2f | %lld | %.2f |\n", share ? "one per prompt (enable_prefix_caching)" : "one per sample",
                run.seconds, static_cast<long long>(rows), per_sample_s / run.seconds);
  }
}

}  // namespace
}  // namespace rlcore

int main(int argc, char** argv) {
  rlcore::BenchOptions options;
  po::options_description desc("bench_scheduling options");
  desc.add_options()("help", "show this help")("model", po::value(&options.model)->required(),
                                               "HF checkpoint directory")("threads", po::value(&options.threads),
                                                                          "intra-op threads (default 2)")(
      "dtype", po::value(&options.dtype), "auto (the checkpoint's) | float32 | bfloat16 (default auto)")(
      "repeats", po::value(&options.repeats), "timed runs per configuration, best reported (default 2)")(
      "requests", po::value(&options.requests), "long-tailed: requests (default 64)")(
      "short-tokens", po::value(&options.short_tokens), "long-tailed: tokens of most requests (default 32)")(
      "long-tokens", po::value(&options.long_tokens), "long-tailed: tokens of the long ones (default 512)")(
      "max-num-seqs", po::value(&options.max_num_seqs), "long-tailed: decode slots (default 16)")(
      "prompts", po::value(&options.prompts), "shared prefill: prompts (default 64)")(
      "n", po::value(&options.n), "shared prefill: samples per prompt (default 8)")(
      "prompt-len", po::value(&options.prompt_len), "shared prefill: prompt tokens (default 256)");
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);
    at::set_num_threads(options.threads);
    std::printf("bench_scheduling: %s, %s, %d threads, %u hardware threads\n", options.model.c_str(),
                c10::toString(rlcore::make_engine(options, {}).dtype()), options.threads,
                std::thread::hardware_concurrency());
    rlcore::long_tailed(options);
    rlcore::shared_prefill(options);
  } catch (const std::exception& e) {
    std::cerr << "bench_scheduling: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
