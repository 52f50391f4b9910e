// Out-of-line members of the runtime errors, so their type info lives in librlcore_core.
#include "rlcore/core/runtime/errors.h"

namespace rlcore::runtime {

std::string WorkerAddress::describe() const { return describe_in_pool(rank); }

std::string WorkerAddress::describe_in_pool(int64_t pool_rank) const {
  std::string text =
      "rank " + std::to_string(pool_rank) + " (host " + (host.empty() ? "?" : host) + ", pid " + std::to_string(pid);
  if (rank != pool_rank) text += ", global rank " + std::to_string(rank);
  return text + ")";
}

WorkerLostError::WorkerLostError(WorkerAddress worker, const std::string& message)
    : Error(message), worker_(std::move(worker)) {}
WorkerLostError::~WorkerLostError() = default;

RemoteCallError::RemoteCallError(WorkerAddress worker, std::string method, const std::string& message)
    : Error(message), worker_(std::move(worker)), method_(std::move(method)) {}
RemoteCallError::~RemoteCallError() = default;

TimeoutError::~TimeoutError() = default;

}  // namespace rlcore::runtime
