// One rank of a tensor-parallel infer-native test: joins a pool whose mesh is
// {rollout_dp: world / tp, rollout_tp: tp}, serves --model split --tp ways and
// generates a fixed batch of prompts (greedy and sampled); writes the outputs
// and its weight shapes to --out/rank_R.json.
//
//   native_tp_rank_runner --rank R --world N --port P --prefix S --out DIR --model DIR --tp T
//                         [--skew 1]   (rank 1 asks for a different prompt: the engine must refuse)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "native_engine.h"
#include "../../common/rank_runner.h"
#include "rlcore/error.h"

namespace {

namespace fs = std::filesystem;
using namespace rlcore;

std::string arg(const testing::RunnerArgs& args, const std::string& key, const std::string& fallback = "") {
  return testing::runner_arg("native_tp_rank_runner", args, key, fallback);
}

// Different lengths (a left-padded batch), ids under the tiny vocabulary of 64; the test compares with tp=1 on these.
std::vector<std::vector<int32_t>> prompts() {
  return {{5, 17, 42}, {10, 7, 25, 33, 9, 61, 2}, {12, 22, 13, 14, 30, 15, 8, 16, 17, 18, 23, 19}, {7}};
}

nlohmann::json output_json(const GenerationOutput& output) {
  return {{"token_ids", output.token_ids}, {"logprobs", output.logprobs}};
}

int run(const std::map<std::string, std::string>& args) {
  at::set_num_threads(1);
  const int64_t rank = std::stoll(arg(args, "rank"));
  const int64_t world = std::stoll(arg(args, "world"));
  const int64_t tp = std::stoll(arg(args, "tp"));
  const fs::path out = arg(args, "out");

  const std::unique_ptr<CommContext> comm = testing::loopback_comm("native_tp_rank_runner", args, "native_tp_test",
                                                                   {{"rollout_dp", world / tp}, {kRolloutTpGroup, tp}});

  ComponentContext context;
  context.model_path = arg(args, "model");
  context.comm = comm.get();
  infer_native::NativeEngineOptions options;
  options.dtype = "float32";
  options.tensor_model_parallel_size = tp;
  options.max_num_seqs = 3;  // the 4 prompts run in two chunks
  infer_native::NativeEngine engine(options, context);

  nlohmann::json result;
  result["tp_rank"] = engine.tp_rank();
  result["tp_size"] = engine.tp_size();
  for (const WeightMeta& meta : engine.weight_meta()) result["shapes"][meta.name] = meta.shape;

  std::vector<std::vector<int32_t>> batch = prompts();
  if (arg(args, "skew", "0") == "1") {
    if (rank == 1) batch[0][0] += 1;
    try {
      engine.generate(batch, SamplingParams{});
    } catch (const ValueError& e) {
      result["skew_error"] = e.what();
    }
  } else {
    SamplingParams greedy;
    greedy.temperature = 0;
    greedy.max_tokens = 8;
    result["greedy"] = output_json(engine.generate(batch, greedy));
    SamplingParams sampled;
    sampled.temperature = 1.0;
    sampled.n = 2;
    sampled.max_tokens = 8;
    sampled.seed = 11;
    result["sampled"] = output_json(engine.generate(batch, sampled));
  }
  std::ofstream(out / ("rank_" + std::to_string(rank) + ".json")) << result.dump(2);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return rlcore::testing::run_rank_main("native_tp_rank_runner", argc, argv, run); }
