// The data plane's rendezvous: the controller hosts a c10d TCPStore; each worker
// joins it and builds process groups for its pool ("world") and for every
// dimension of the pool's mesh, handed to plugins as a CommContext. Host tensors
// go through Gloo; device tensors through NCCL (or Gloo) when a device backend
// is asked for.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "rlcore/comm_context.h"
#include "rlcore/core/runtime/mesh.h"
#include "rlcore/export.h"

namespace rlcore {

// The controller's c10d TCPStore server. The store has no authentication:
// keep its port reachable only from the workers' network.
class RLCORE_API RendezvousStore {
 public:
  // Listens on `port` (0: any free port). Throws IoError.
  RendezvousStore(const std::string& host, int port, std::chrono::milliseconds timeout);
  ~RendezvousStore();
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct ProcessGroupOptions {
  std::string store_host;
  int store_port = 0;
  std::string prefix;  // unique per pool, so pools rendezvous separately
  int64_t rank = 0;    // rank in the pool
  int64_t world_size = 1;
  int64_t local_rank = 0;
  MeshShape mesh;  // empty: {dp: world_size}
  // The address Gloo listens on; empty: the local address that routes to store_host.
  std::string local_address;
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  // Backend for CUDA tensors: "" (host tensors only), "nccl", or "gloo" (when
  // several ranks share one GPU, which NCCL refuses). The caller binds the
  // worker's CUDA device before make_comm_context.
  std::string device_backend;
};

// "nccl", "gloo" or "": the device backends make_comm_context accepts.
RLCORE_API void validate_device_backend(const std::string& device_backend);

// Joins the store and creates the groups ("world" plus one per mesh dimension).
// Every rank of the pool must call it; throws Error naming the rank on failure.
RLCORE_API std::unique_ptr<CommContext> make_comm_context(const ProcessGroupOptions& options);

// The local IP address this host uses to reach `host` (no packet is sent).
RLCORE_API std::string local_address_towards(const std::string& host);

}  // namespace rlcore
