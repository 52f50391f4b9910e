// rlcore/device.h: device strings, the errors that say why a device cannot be
// had (CPU build here), and the CPU's measured memory (VmRSS / VmHWM).
#include <sys/mman.h>

#include <cstring>
#include <functional>

#include <catch2/catch.hpp>

#include "rlcore/device.h"
#include "rlcore/device_graph.h"
#include "rlcore/error.h"
#include "rlcore/plugin_abi.h"

using rlcore::ConfigError;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kBuffer = 64 * kMiB;

std::string config_error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

// 64 MiB of anonymous memory of its own (never the malloc heap's), written so it is resident.
struct TouchedBuffer {
  TouchedBuffer() {
    data = mmap(nullptr, kBuffer, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(data != MAP_FAILED);
    touch();
  }
  ~TouchedBuffer() { munmap(data, kBuffer); }
  void touch() { std::memset(data, 1, kBuffer); }
  void* data = nullptr;
};

}  // namespace

TEST_CASE("cpu and auto resolve to the cpu without a GPU; unknown strings name the key", "[device]") {
  CHECK(rlcore::resolve_device("cpu", 3, "trainer.device") == at::Device(at::kCPU));
  if (rlcore::cuda_device_count() == 0)
    CHECK(rlcore::resolve_device("auto", 0, "trainer.device") == at::Device(at::kCPU));
  for (const std::string bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "CPU", ""}) {
    INFO(bad);
    const std::string message = config_error_of([&] { rlcore::resolve_device(bad, 0, "trainer.device"); });
    CHECK_THAT(message, Catch::Contains("key trainer.device: unknown device '" + bad + "'"));
    CHECK_THAT(message, Catch::Contains("auto, cpu, cuda or cuda:N"));
  }
}

TEST_CASE("without a usable GPU, cuda is refused naming the key and what is missing", "[device]") {
  // The CPU flavour has no CUDA at all; the CUDA flavour on a machine without a GPU (CI) sees none.
  // tests/cuda/cuda_device_test.cc holds the GPU side, with the index past the GPUs.
  if (rlcore::cuda_device_count() > 0) {
    // The CUDA flavour's suite on a machine with a GPU: cuda resolves.
    CHECK(rlcore::resolve_device("cuda:0", 0, "trainer.device") == at::Device(at::kCUDA, 0));
    return;
  }
  const std::string missing = rlcore::cuda_build() ? "this rlcore build has CUDA but this process sees no GPU"
                                                   : "this rlcore build has no CUDA (libtorch " RLCORE_TORCH_VERSION
                                                     ", CPU)";
  const std::string fix = rlcore::cuda_build() ? "CUDA_VISIBLE_DEVICES" : "bash scripts/build.sh --cuda";
  for (const std::string requested : {"cuda", "cuda:0", "cuda:1"}) {
    INFO(requested);
    const std::string message = config_error_of([&] { rlcore::resolve_device(requested, 0, "trainer.device"); });
    CHECK_THAT(message, Catch::Contains("key trainer.device=" + requested));
    CHECK_THAT(message, Catch::Contains(missing));
    CHECK_THAT(message, Catch::Contains(fix));
    CHECK_THAT(message, Catch::Contains("trainer.device=cpu"));
  }
  // The controller's check says the same before any worker starts; cpu and auto need no GPU.
  CHECK_THAT(
      config_error_of([] { rlcore::check_device_slots("cuda", 2, "trainer.device", "trainer.n_gpus_per_node"); }),
      Catch::Contains(missing));
  CHECK_NOTHROW(rlcore::check_device_slots("cpu", 64, "trainer.device", "trainer.n_gpus_per_node"));
  CHECK_NOTHROW(rlcore::check_device_slots("auto", 64, "trainer.device", "trainer.n_gpus_per_node"));
}

TEST_CASE("bfloat16 is refused only on a GPU older than compute capability 8.0", "[device]") {
  CHECK_NOTHROW(rlcore::check_dtype_supported(at::Device(at::kCPU), at::kBFloat16, "dtype"));
  CHECK_NOTHROW(rlcore::check_dtype_supported(at::Device(at::kCPU), at::kFloat, "dtype"));
}

TEST_CASE("device graphs record only on a CUDA device; an empty one refuses to replay", "[device]") {
  CHECK_FALSE(rlcore::DeviceGraph::supported(at::Device(at::kCPU)));
  if (!rlcore::cuda_build()) CHECK_FALSE(rlcore::DeviceGraph::supported(at::Device(at::kCUDA, 0)));
  rlcore::DeviceGraph graph;
  bool ran = false;
  CHECK_THROWS_WITH(graph.record(at::Device(at::kCPU), [&] { ran = true; }),
                    Catch::Contains("cannot record on cpu") && Catch::Contains("CUDA device"));
  CHECK_FALSE(ran);
  CHECK_FALSE(graph.recorded());
  CHECK_THROWS_WITH(graph.replay(), Catch::Contains("nothing recorded"));
}

TEST_CASE("cpu peak memory: VmHWM rises by a touched 64 MiB buffer and falls back after a reset", "[device][memory]") {
  const at::Device cpu(at::kCPU);
  REQUIRE(rlcore::reset_peak_memory(cpu));
  const rlcore::DeviceMemoryStats before = rlcore::device_memory_stats(cpu);
  CHECK(before.reserved > 0);
  CHECK(before.peak_allocated >= before.reserved);
  int64_t peak_with_buffer = 0;
  {
    TouchedBuffer buffer;
    const rlcore::DeviceMemoryStats touched = rlcore::device_memory_stats(cpu);
    CHECK(touched.reserved >= before.reserved + kBuffer - kMiB);
    peak_with_buffer = touched.peak_allocated;
    CHECK(peak_with_buffer >= before.peak_allocated + kBuffer - kMiB);
  }
  // Unmapped: the high-water mark stays until reset, then drops to the resident
  // set. (The kernel's RSS counters are per-CPU and read approximately: a few
  // pages either way, hence 1 MiB of slack in every comparison here.)
  CHECK(rlcore::device_memory_stats(cpu).peak_allocated >= peak_with_buffer - kMiB);
  REQUIRE(rlcore::reset_peak_memory(cpu));
  CHECK(rlcore::device_memory_stats(cpu).peak_allocated <= peak_with_buffer - kBuffer + kMiB);
}

TEST_CASE("host memory: this process's RSS counts a touched 64 MiB buffer; the machine's use covers it",
          "[device][memory]") {
  const int64_t before = rlcore::process_rss_bytes();
  CHECK(before > 0);
  {
    TouchedBuffer buffer;
    const int64_t touched = rlcore::process_rss_bytes();
    CHECK(touched >= before + kBuffer - kMiB);
    CHECK(rlcore::host_memory_used_bytes() >= touched);
  }
  CHECK(rlcore::process_rss_bytes() <= before + kMiB);  // unmapped: gone from the resident set
}

TEST_CASE("PeakMemoryMeter counts a phase's new memory, including lazily freed pages it reuses", "[device][memory]") {
  const at::Device cpu(at::kCPU);
  TouchedBuffer buffer;
  {
    rlcore::PeakMemoryMeter idle(cpu);
    REQUIRE(idle.per_phase());
    CHECK(idle.peak_above_start() < 4 * kMiB);
  }
  {
    rlcore::PeakMemoryMeter meter(cpu);
    TouchedBuffer second;
    CHECK(meter.peak_above_start() >= kBuffer - kMiB);
  }
  // MADV_FREE: the pages stay in VmRSS until the kernel takes them; writing
  // them again makes them this process's memory again without growing VmRSS.
  REQUIRE(madvise(buffer.data, kBuffer, MADV_FREE) == 0);
  rlcore::PeakMemoryMeter reuse(cpu);
  buffer.touch();
  CHECK(reuse.peak_above_start() >= kBuffer - kMiB);
  CHECK(reuse.peak_above_start() < 2 * kBuffer);
}
