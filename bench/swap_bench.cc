// Weight-swap benchmark of the hybrid engine: an fsdp actor and a native
// rollout in one process (dp 1), swapped train -> rollout -> train by the
// `bucketed` or `naive` sharding manager. Prints one table row: swap times,
// effective GB/s against memcpy of the same bytes measured in this run (warm
// buffers, and into freshly allocated memory as a bucket is), and the ledger's
// and the measured swap peaks (bench/run_swap_bench.sh).
//
//   bench_swap --model DIR --mode bucketed|naive [--bucket-release lazy_free|unmap] [--train-dtype D] [--rollout-dtype
//   D]
//              [--lora-rank R [--lora-base-cache true|false]] [--reps N] [--threads N] [--header]
// With --lora-rank the actor trains LoRA adapters on every projection (all-linear):
// the first swap gathers the base and later ones rebuild only the adapted weights
// unless --lora-base-cache false.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>

#include <boost/program_options.hpp>

#include "engine_offloader.h"
#include "fsdp_engine.h"
#include "identity_adaptor.h"
#include "memory_reference.h"
#include "native_engine.h"
#include "rlcore/elapsed_seconds.h"
#include "sharding_manager_impl.h"

namespace {

namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;
using namespace rlcore;
using bench::memcpy_gbps;

std::string short_dtype(const std::string& dtype) {
  if (dtype == "bfloat16") return "bf16";
  if (dtype == "float32") return "fp32";
  return dtype;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, mode = "bucketed", train_dtype = "bfloat16", rollout_dtype = "bfloat16";
  hybrid_engine::HybridOptions hybrid_options;
  std::string device = "cpu";
  int reps = 3, threads = 2;
  int64_t lora_rank = 0;
  std::string lora_base_cache = "true";
  po::options_description options("bench_swap");
  options.add_options()("help,h", "this text")("model", po::value(&model)->required(), "HF checkpoint directory")(
      "mode", po::value(&mode), "bucketed | naive (default bucketed)")(
      "bucket-release", po::value(&hybrid_options.bucket_release), "lazy_free | unmap (default lazy_free)")(
      "train-dtype", po::value(&train_dtype), "fsdp compute dtype; masters are fp32 (default bfloat16)")(
      "rollout-dtype", po::value(&rollout_dtype), "infer-native dtype (default bfloat16)")(
      "lora-rank", po::value(&lora_rank), "LoRA rank of the actor on every projection (default 0: off)")(
      "lora-base-cache", po::value(&lora_base_cache),
      "with LoRA: auto (on when sharded: never at one rank) | true (default here) | false")(
      "reps", po::value(&reps), "swaps (default 3)")("threads", po::value(&threads), "intra-op threads (default 2)")(
      "device", po::value(&device), "cpu or cuda[:N]: where both engines and the bucket live (default cpu)")(
      "header", "print the table header first");
  try {
    po::variables_map values;
    po::store(po::parse_command_line(argc, argv, options), values);
    if (values.count("help")) {
      std::cout << options;
      return 0;
    }
    po::notify(values);
    if (hybrid_options.bucket_release != "lazy_free" && hybrid_options.bucket_release != "unmap") {
      throw std::invalid_argument("--bucket-release must be lazy_free or unmap, got '" + hybrid_options.bucket_release +
                                  "'");
    }
    hybrid_options.lora_base_cache = lora_base_cache;
    at::set_num_threads(threads);
    ComponentContext context;
    context.model_path = model;
    context.device = device;
    const at::Device where(device);
    train_fsdp::FsdpOptions train_options;
    train_options.fsdp_config.dtype = train_dtype;
    train_options.lora.lora_rank = lora_rank;
    auto actor = std::make_shared<train_fsdp::FsdpEngine>(train_options, context);
    infer_native::NativeEngineOptions rollout_options;
    rollout_options.dtype = rollout_dtype;
    auto rollout = std::make_shared<infer_native::NativeEngine>(rollout_options, context);
    const auto made = hybrid_engine::make_sharding_manager(
        hybrid_options, mode == "naive" ? hybrid_engine::SwapMode::kNaive : hybrid_engine::SwapMode::kBucketed);
    hybrid_engine::HybridShardingManager& manager = *made;
    manager.attach({actor,
                    rollout,
                    std::make_shared<hybrid_engine::IdentityAdaptor>(),
                    std::make_shared<hybrid_engine::EngineOffloader>(),
                    {}});
    const int64_t bytes = manager.plan().bucket_bytes;
    double to_rollout = 1e30, to_train = 1e30, first_to_rollout = 0;
    SwapStats best;
    int64_t peak = 0;
    int64_t measured_peak = 0;
    // Timed here to the device's completion: a GPU's copies are queued asynchronously.
    const auto timed = [&](auto swap) {
      const auto start = Clock::now();
      SwapStats stats = swap();
      bench::wait_for_device(where);
      stats.seconds = seconds_since(start);
      return stats;
    };
    for (int r = 0; r < reps; ++r) {
      const SwapStats in = timed([&] { return manager.to_rollout(r + 1); });
      const SwapStats out = timed([&] { return manager.to_train(); });
      if (r == 0) first_to_rollout = in.seconds;
      if (in.seconds < to_rollout) best = in;
      to_rollout = std::min(to_rollout, in.seconds);
      to_train = std::min(to_train, out.seconds);
      peak = std::max({peak, in.planned_peak_bytes, out.planned_peak_bytes});
      measured_peak = std::max({measured_peak, in.measured_peak_bytes, out.measured_peak_bytes});
    }
    const double gbps = static_cast<double>(bytes) / to_rollout / 1e9;
    // After the swaps, so the reference's buffers do not raise the RSS high-water mark first.
    // On a GPU both references are its device-to-device copy (there is no page-fault cost to split out).
    const double memcpy =
        where.is_cpu() ? memcpy_gbps(bytes, reps, /*fresh=*/false) : bench::device_copy_gbps(bytes, reps, where);
    const double memcpy_fresh = where.is_cpu() ? memcpy_gbps(bytes, reps, /*fresh=*/true) : memcpy;
    if (values.count("header")) {
      std::printf(
          "| model | train master (compute) -> rollout | mode | threads | rollout bytes | first to_rollout s | "
          "to_rollout s | to_train s | swap GB/s | memcpy GB/s | ratio | fresh memcpy GB/s | ratio fresh | "
          "gather / convert / copy s | ledger peak MB | measured peak MB |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    }
    std::string mode_label = mode == "naive" ? mode : mode + " (" + hybrid_options.bucket_release + ")";
    if (lora_rank > 0) {
      mode_label += ", LoRA r" + std::to_string(lora_rank) +
                    (mode != "naive" && lora_base_cache == "true" ? " base cached" : " full gather");
    }
    std::printf(
        "| %s | fp32 (%s compute) -> %s | %s | %d | %.1f MB | %.4f | %.4f | %.4f | %.2f | %.2f | %.2f | %.2f | "
        "%.2f | %.3f / %.3f / %.3f | %.1f | %.1f |\n",
        model.substr(model.find_last_of('/') + 1).c_str(), short_dtype(train_dtype).c_str(),
        short_dtype(rollout_dtype).c_str(), mode_label.c_str(), threads, bytes / 1e6, first_to_rollout, to_rollout,
        to_train, gbps, memcpy, gbps / memcpy, memcpy_fresh, gbps / memcpy_fresh, best.gather_s, best.convert_s,
        best.copy_s, peak / 1e6, measured_peak / 1e6);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_swap: " << e.what() << "\n";
    return 1;
  }
}
