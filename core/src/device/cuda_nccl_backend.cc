// NCCL backend of the CUDA flavour (libtorch 2.x: one ProcessGroup holds a
// backend per device type, and c10d dispatches each collective by the device
// of its tensors).
#include "nccl_backend.h"

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

namespace rlcore::device {

void add_nccl_backend(c10d::ProcessGroup& group, const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      std::chrono::milliseconds timeout, const std::string& name) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  // With async error handling (TORCH_NCCL_ASYNC_ERROR_HANDLING, on by default),
  // NCCL's watchdog aborts a collective that exceeds this timeout, so a dead or
  // stuck peer becomes an error in wait() instead of a hang.
  options->timeout = timeout;
  options->group_name = name;
  auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
  group.setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl);
}

}  // namespace rlcore::device
