// The device backend of the CUDA flavour. Only calls present in both libtorch
// 1.13 and 2.x: device_count/set_device (c10/cuda), getDeviceProperties (ATen),
// the caching allocator's getDeviceStats/resetPeakStats/emptyCache, and
// at::cuda::CUDAGraph's capture_begin/capture_end/replay.
#include "backend.h"

#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/version.h>

#include "rlcore/error.h"

namespace rlcore::device_backend {
namespace {

// StatType::AGGREGATE (all pools): 0 in both 1.13 (c10::cuda::CUDACachingAllocator)
// and 2.x (c10::CachingAllocator), whose namespaces differ.
constexpr std::size_t kAggregate = 0;

c10::DeviceIndex index_of(int64_t index) { return static_cast<c10::DeviceIndex>(index); }

// The caching allocator exists only once CUDA is initialised, which libtorch
// does lazily at the first CUDA tensor; its statistics before then throw
// "Invalid device argument".
void initialise_cuda() {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 6)
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
#else
  at::globalContext().lazyInitCUDA();
#endif
}

class CudaGraph final : public Graph {
 public:
  void replay() override { graph.replay(); }
  at::cuda::CUDAGraph graph;
};

}  // namespace

bool has_cuda() { return true; }

int64_t device_count() { return static_cast<int64_t>(c10::cuda::device_count()); }

void set_device(int64_t index) {
  initialise_cuda();
  c10::cuda::set_device(index_of(index));
}

std::string device_name(int64_t index) { return at::cuda::getDeviceProperties(index_of(index))->name; }

std::pair<int, int> compute_capability(int64_t index) {
  const auto* properties = at::cuda::getDeviceProperties(index_of(index));
  return {properties->major, properties->minor};
}

AllocatorStats allocator_stats(int64_t index) {
  initialise_cuda();
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_of(index));
  AllocatorStats out;
  out.allocated = stats.allocated_bytes[kAggregate].current;
  out.reserved = stats.reserved_bytes[kAggregate].current;
  out.peak_allocated = stats.allocated_bytes[kAggregate].peak;
  return out;
}

void reset_peak(int64_t index) {
  initialise_cuda();
  c10::cuda::CUDACachingAllocator::resetPeakStats(index_of(index));
}

void empty_cache() {
  initialise_cuda();
  c10::cuda::CUDACachingAllocator::emptyCache();
}

std::unique_ptr<Graph> record_graph(int64_t index, const std::function<void()>& work) {
  const c10::cuda::CUDAGuard device_guard(index_of(index));
  // Recording needs a stream of its own; the work already queued must finish
  // first, since a graph records what its stream does, not what it waits on.
  c10::cuda::device_synchronize();
  const c10::cuda::CUDAStreamGuard stream_guard(c10::cuda::getStreamFromPool(false, index_of(index)));
  const auto failed = [index](const std::exception& e) {
    return Error("recording a CUDA graph on cuda:" + std::to_string(index) + " failed: " + e.what());
  };
  auto recorded = std::make_unique<CudaGraph>();
  recorded->graph.capture_begin();
  try {
    work();
  } catch (const std::exception& e) {
    try {
      recorded->graph.capture_end();  // ends the stream's capture mode; the graph is invalid anyway
    } catch (const std::exception&) {
    }
    throw failed(e);
  }
  try {
    recorded->graph.capture_end();
  } catch (const std::exception& e) {
    throw failed(e);
  }
  return recorded;
}

}  // namespace rlcore::device_backend
