// The device layer on a real GPU: binding, the caching allocator's statistics
// as rlcore reports them, memory really returned by release_cached_memory, and
// device graphs recorded once and replayed.
#include "cuda_testing.h"

#include "rlcore/device_graph.h"
#include "rlcore/error.h"

using namespace cuda_test;

TEST_CASE("cuda devices resolve and bind by local rank", "[cuda]") {
  const at::Device device = require_gpu();
  CHECK(device == at::Device(at::kCUDA, 0));
  CHECK(rlcore::resolve_device("auto", 0, "test") == device);
  const int64_t count = rlcore::cuda_device_count();
  CHECK_THROWS_WITH(rlcore::resolve_device("cuda:" + std::to_string(count), 0, "trainer.device"),
                    Catch::Contains("trainer.device") && Catch::Contains("past the"));
  if (count == 1) {
    // One visible GPU belongs to the worker whatever its local rank (srun --gpus-per-task 1).
    CHECK(rlcore::resolve_device("cuda", 3, "trainer.device") == device);
  } else {
    CHECK(rlcore::resolve_device("cuda", count - 1, "trainer.device") == at::Device(at::kCUDA, count - 1));
    CHECK_THROWS_WITH(rlcore::resolve_device("cuda", count, "trainer.device"), Catch::Contains("local rank"));
    rlcore::resolve_device("cuda", 0, "trainer.device");
  }
}

TEST_CASE("an index past the GPUs names the GPU, the count and the worker key", "[cuda]") {
  require_gpu();
  const int64_t count = rlcore::cuda_device_count();
  const std::string past = "cuda:" + std::to_string(count);
  std::string message;
  try {
    rlcore::resolve_device(past, 0, "trainer.device");
  } catch (const rlcore::ConfigError& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::Contains("key trainer.device=" + past));
  CHECK_THAT(message, Catch::Contains("GPU " + std::to_string(count)));
  CHECK_THAT(message, Catch::Contains(std::to_string(count) + " GPU(s)"));
  CHECK_THROWS_WITH(rlcore::check_device_slots("cuda", count + 1, "trainer.device", "trainer.n_gpus_per_node"),
                    Catch::Contains("trainer.n_gpus_per_node"));
  CHECK_NOTHROW(rlcore::check_device_slots("cuda", count, "trainer.device", "trainer.n_gpus_per_node"));
}

TEST_CASE("allocator statistics follow allocations, peaks reset, caches are returned", "[cuda]") {
  const at::Device device = require_gpu();
  rlcore::release_cached_memory(device);
  const rlcore::DeviceMemoryStats before = rlcore::device_memory_stats(device);
  constexpr int64_t kBytes = 256 << 20;
  {
    rlcore::PeakMemoryMeter meter(device);
    at::Tensor block = at::empty({kBytes}, at::TensorOptions().dtype(at::kByte).device(device));
    const rlcore::DeviceMemoryStats during = rlcore::device_memory_stats(device);
    CHECK(during.allocated - before.allocated >= kBytes);
    CHECK(during.reserved >= during.allocated);
    block.reset();
    CHECK(meter.per_phase());
    CHECK(meter.peak_above_start() >= kBytes);
    CHECK(meter.peak_above_start() < 2 * kBytes);
  }
  const rlcore::DeviceMemoryStats cached = rlcore::device_memory_stats(device);
  CHECK(cached.allocated == before.allocated);
  CHECK(cached.reserved - before.reserved >= kBytes);  // the allocator keeps the block
  rlcore::release_cached_memory(device);
  CHECK(rlcore::device_memory_stats(device).reserved < cached.reserved);
}

TEST_CASE("a device graph records without running and replays on new inputs", "[cuda]") {
  const at::Device device = require_gpu();
  REQUIRE(rlcore::DeviceGraph::supported(device));
  const at::Tensor input = at::arange(1000, at::TensorOptions().dtype(at::kFloat).device(device));
  const at::Tensor output = at::zeros_like(input);
  const auto work = [&] { output.copy_(at::exp(input / 100) + 1); };
  work();  // the warm-up a recording needs
  output.zero_();
  rlcore::DeviceGraph graph;
  graph.record(device, work);
  REQUIRE(graph.recorded());
  CHECK(output.abs().sum().item<double>() == 0);  // recorded, not run
  for (double shift : {0.0, 3.0}) {
    input.copy_(at::arange(1000, input.options()) + shift);
    graph.replay();
    CHECK(output.equal(at::exp(input / 100) + 1));
  }
  CHECK_THROWS_WITH(rlcore::DeviceGraph().replay(), Catch::Contains("nothing recorded"));
}
