// NCCL backend of the CUDA flavour (libtorch 2.x: one ProcessGroup holds a
// backend per device type, and c10d dispatches each collective by the device
// of its tensors).
#include "nccl_backend.h"

#include <cstdlib>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

namespace rlcore::device {

void add_nccl_backend(c10d::ProcessGroup& group, const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      std::chrono::milliseconds timeout, const std::string& name) {
  // NCCL's watchdog ends a collective that exceeds `timeout`. CleanUpOnly (2):
  // it aborts the group's communicators (ncclCommAbort) and fails the rank's
  // work, but keeps the process, so the worker reports the error and the
  // controller names the ranks (docs/launch.md#hung-collectives). libtorch's
  // default (3) tears the process down, and the controller would only see a
  // lost worker: a rank that did reach the collective. A user's setting wins.
  ::setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2", /*overwrite=*/0);
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  options->group_name = name;
  auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
  group.setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl);
}

}  // namespace rlcore::device
