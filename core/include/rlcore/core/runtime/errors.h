// Errors of the worker runtime: a worker that died or stopped answering, and an
// exception raised by a worker's method. Both name the rank, host and pid.
#pragma once

#include <cstdint>
#include <string>

#include "rlcore/error.h"
#include "rlcore/export.h"

namespace rlcore::runtime {

// Where a worker runs, as reported in its hello.
struct WorkerAddress {
  int64_t rank = -1;  // global rank in the run
  std::string host;
  int64_t pid = 0;

  // "rank 1 (host node3, pid 4242)"
  RLCORE_API std::string describe() const;
  // As rank `pool_rank` of its pool, with the global rank when it differs:
  // "rank 0 (host node3, pid 4242, global rank 2)".
  RLCORE_API std::string describe_in_pool(int64_t pool_rank) const;
};

// A worker died, stopped sending heartbeats or was refused; the run cannot go on.
class RLCORE_API WorkerLostError : public Error {
 public:
  WorkerLostError(WorkerAddress worker, const std::string& message);
  ~WorkerLostError() override;
  const WorkerAddress& worker() const { return worker_; }

 private:
  WorkerAddress worker_;
};

// A worker's method threw; the message carries the worker's exception text.
class RLCORE_API RemoteCallError : public Error {
 public:
  RemoteCallError(WorkerAddress worker, std::string method, const std::string& message);
  ~RemoteCallError() override;
  const WorkerAddress& worker() const { return worker_; }
  const std::string& method() const { return method_; }

 private:
  WorkerAddress worker_;
  std::string method_;
};

// A wait on the control plane passed its deadline.
class RLCORE_API TimeoutError : public Error {
 public:
  using Error::Error;
  ~TimeoutError() override;
};

}  // namespace rlcore::runtime
