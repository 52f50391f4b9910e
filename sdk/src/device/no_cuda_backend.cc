// The device backend of the CPU flavour: no GPU exists for this build.
#include "backend.h"

#include "rlcore/error.h"

namespace rlcore::device_backend {
namespace {

[[noreturn]] void no_cuda(const char* call) {
  throw Error(std::string("device backend: ") + call + " called in a build without CUDA");
}

}  // namespace

bool has_cuda() { return false; }
int64_t device_count() { return 0; }
void set_device(int64_t) { no_cuda("set_device"); }
std::string device_name(int64_t) { no_cuda("device_name"); }
std::pair<int, int> compute_capability(int64_t) { no_cuda("compute_capability"); }
AllocatorStats allocator_stats(int64_t) { no_cuda("allocator_stats"); }
void reset_peak(int64_t) { no_cuda("reset_peak"); }
void empty_cache() {}
std::unique_ptr<Graph> record_graph(int64_t, const std::function<void()>&) { no_cuda("record_graph"); }

}  // namespace rlcore::device_backend
