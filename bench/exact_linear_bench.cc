// The batch-invariant linear layer (rlcore/model/exact_linear.h) against
// at::linear (OpenBLAS sgemm, or the decode GEMV's reference), at the row
// counts of decode and prefill, on the 124M Llama's shapes (issue 54: hidden
// 768, MLP 2048, vocabulary 32,000), fp32. Prints ms per call (best of
// --repeats), GFLOP/s, the ratio to at::linear, and the read-bandwidth floor
// (the weight's bytes over the read bandwidth measured in the same run).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <boost/program_options.hpp>

#include "rlcore/model/cpu_kernels.h"
#include "rlcore/model/exact_linear.h"

namespace {

template <typename F>
double best_ms(int repeats, F&& call) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    call();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// GB/s reading a buffer larger than the caches, summed so the reads happen.
double read_gbps(int repeats) {
  const at::Tensor buffer = at::ones({int64_t{64} << 20});  // 256 MB
  const double ms = best_ms(repeats, [&] { (void)buffer.sum().item<float>(); });
  return 256.0 * 1.048576 / ms;  // MB -> GB, per ms -> per s
}

}  // namespace

int main(int argc, char** argv) {
  namespace po = boost::program_options;
  int repeats = 5;
  int threads = 2;
  po::options_description options("bench_exact_linear");
  options.add_options()("help", "this text")("repeats", po::value(&repeats), "calls timed per cell (best kept)")(
      "threads", po::value(&threads), "ATen / kernel threads");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, options), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << options << "\n";
    return 0;
  }
  at::set_num_threads(threads);
  at::NoGradGuard no_grad;
  const double gbps = read_gbps(repeats);
  std::printf("exact_linear vs at::linear, fp32, %d threads, %s\n", threads,
              rlcore::model::describe_cpu_kernels().c_str());
  std::printf("read bandwidth %.1f GB/s\n\n", gbps);
  std::printf(
      "| weight (out x in) | rows | at::linear ms | exact ms | exact / at::linear | exact GFLOP/s | "
      "read floor ms |\n|---|---:|---:|---:|---:|---:|---:|\n");
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}};
  for (const auto& [out, in] : shapes) {
    const at::Tensor weight = at::randn({out, in});
    for (int64_t rows : {1, 8, 9, 16, 32, 64, 512}) {
      const at::Tensor x = at::randn({rows, in});
      const double reference = best_ms(repeats, [&] { (void)at::linear(x, weight); });
      const double exact = best_ms(repeats, [&] { (void)rlcore::model::exact_linear(x, weight); });
      const double flops = 2.0 * static_cast<double>(rows * in * out);
      const double floor_ms = static_cast<double>(out * in * 4) / (gbps * 1e6);
      std::printf("| %lld x %lld | %lld | %.3f | %.3f | %.2f | %.1f | %.3f |\n", static_cast<long long>(out),
                  static_cast<long long>(in), static_cast<long long>(rows), reference, exact, exact / reference,
                  flops / (exact * 1e6), floor_ms);
    }
  }
  return 0;
}
