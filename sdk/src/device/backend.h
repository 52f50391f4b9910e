// Private to the SDK: the few CUDA calls rlcore makes, behind plain functions.
// cuda_backend.cc implements them in the CUDA flavour; no_cuda_backend.cc is
// its twin for the CPU flavour (sdk/CMakeLists.txt compiles one of the two),
// so no other file includes a CUDA header or needs an #ifdef.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace rlcore::device_backend {

// Compiled against a CUDA libtorch.
bool has_cuda();
// Visible GPUs (0 when the driver finds none).
int64_t device_count();
// The calls below take an index < device_count(); the CPU twin throws Error.
void set_device(int64_t index);
std::string device_name(int64_t index);
// Compute capability, e.g. {8, 0} for an A100.
std::pair<int, int> compute_capability(int64_t index);

struct AllocatorStats {
  int64_t allocated = 0;
  int64_t reserved = 0;
  int64_t peak_allocated = 0;
};
AllocatorStats allocator_stats(int64_t index);
void reset_peak(int64_t index);
void empty_cache();

// Device work recorded once, replayed with one launch (a CUDA graph).
class Graph {
 public:
  virtual ~Graph() = default;
  // Queues the recorded work on the device's current stream.
  virtual void replay() = 0;
};
// Records what `work` queues on device `index` (not running it); throws Error
// naming the cause when recording fails, and the CPU twin always throws.
std::unique_ptr<Graph> record_graph(int64_t index, const std::function<void()>& work);

}  // namespace rlcore::device_backend
