// The vllm_bridge's costs against their baselines, measured in one run:
// greedy tokens/s through the bridge (HTTP to a server) vs infer-native in
// process on the same model and prompts, and a weight update through the disk
// path (snapshot + server reload) vs writing the same bytes to the same disk.
// bench/run_vllm_bridge_bench.sh starts the server and drives this.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "bridge_engine.h"
#include "native_engine.h"
#include "rlcore/elapsed_seconds.h"
#include "rlcore/safetensors/safetensors.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

std::vector<std::vector<int32_t>> prompts_of(int64_t batch, int64_t length) {
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int32_t> prompt;
    for (int64_t t = 0; t < length; ++t) prompt.push_back(static_cast<int32_t>(3 + (b * 31 + t * 7) % 200));
    prompts.push_back(prompt);
  }
  return prompts;
}

// Best-of-`reps` seconds of `action`.
template <class Action>
double best_seconds(int64_t reps, Action&& action) {
  double best = 1e30;
  for (int64_t r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    action();
    best = std::min(best, rlcore::seconds_since(start));
  }
  return best;
}

int64_t generated_tokens(const rlcore::GenerationOutput& out) {
  int64_t tokens = 0;
  for (const auto& ids : out.token_ids) tokens += static_cast<int64_t>(ids.size());
  return tokens;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, server, batches_text, weights_dir;
  int64_t max_tokens = 0, prompt_len = 0, reps = 0;
  po::options_description options("bench_vllm_bridge");
  options.add_options()("model", po::value(&model)->required(), "checkpoint the server runs")(
      "server", po::value(&server)->required(), "http://host:port of rlcore serve --dev-mode / vLLM / SGLang")(
      "batches", po::value(&batches_text)->default_value("1,16"), "prompts per generate call")(
      "max-tokens", po::value(&max_tokens)->default_value(64), "new tokens per prompt (greedy)")(
      "prompt-len", po::value(&prompt_len)->default_value(32), "prompt tokens")(
      "reps", po::value(&reps)->default_value(3), "repetitions (best is reported)")(
      "weights-dir", po::value(&weights_dir)->default_value(""), "where snapshots go (default: a temp dir)");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, options), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "bench_vllm_bridge: " << e.what() << "\n" << options;
    return 2;
  }
  rlcore::ComponentContext context;
  context.model_path = model;
  rlcore::infer_vllm_bridge::BridgeOptions bridge_options;
  bridge_options.server_urls = {server};
  bridge_options.weights_dir = weights_dir;
  rlcore::infer_vllm_bridge::BridgeEngine bridge(bridge_options, context);
  rlcore::infer_native::NativeEngine native({}, context);

  rlcore::SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_tokens = max_tokens;
  std::printf(
      "### vllm_bridge vs infer-native in process (%s %s at %s; greedy, prompt %lld, %lld new tokens, best of "
      "%lld)\n\n",
      rlcore::infer_vllm_bridge::server_kind_name(bridge.server().kind), bridge.server().version.c_str(),
      server.c_str(), static_cast<long long>(prompt_len), static_cast<long long>(max_tokens),
      static_cast<long long>(reps));
  std::printf("| batch | in-process tok/s | bridge tok/s | ratio (bridge/in-process) |\n|---:|---:|---:|---:|\n");
  for (int64_t batch : parse_list(batches_text)) {
    const auto prompts = prompts_of(batch, prompt_len);
    int64_t tokens = 0;
    const double native_s = best_seconds(reps, [&] { tokens = generated_tokens(native.generate(prompts, greedy)); });
    const double bridge_s = best_seconds(reps, [&] { tokens = generated_tokens(bridge.generate(prompts, greedy)); });
    std::printf("| %lld | %.1f | %.1f | %.2fx |\n", static_cast<long long>(batch), tokens / native_s, tokens / bridge_s,
                native_s / bridge_s);
  }

  rlcore::NamedTensors tensors = rlcore::SafetensorsCheckpoint(model).load_all();
  const rlcore::NamedTensorList weights(tensors.begin(), tensors.end());
  double bytes = 0;
  for (const auto& [name, tensor] : weights) bytes += static_cast<double>(tensor.numel() * tensor.element_size());
  int64_t version = 0;
  const double update_s = best_seconds(reps, [&] { bridge.load_weights(weights, ++version); });
  // The same bytes to the same disk, fsynced, with nothing else: what the disk path cannot beat.
  const fs::path scratch = bridge.weights_dir() / "disk-baseline";
  const double disk_s = best_seconds(reps, [&] {
    fs::remove_all(scratch);
    rlcore::save_safetensors_checkpoint(scratch, tensors, 5'000'000'000);
  });
  fs::remove_all(scratch);
  std::printf(
      "\n| weights MB | update through the bridge s | update GB/s | disk write s | disk GB/s | ratio (update/disk "
      "time) |\n"
      "|---:|---:|---:|---:|---:|---:|\n");
  std::printf("| %.1f | %.4f | %.3f | %.4f | %.3f | %.2fx |\n", bytes / 1e6, update_s, bytes / update_s / 1e9, disk_s,
              bytes / disk_s / 1e9, update_s / disk_s);
  return 0;
}
