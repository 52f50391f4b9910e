// The data plane's rendezvous: the controller hosts a c10d store (a FileStore in
// a private directory when every worker runs on this host, else a TCPStore);
// each worker joins it and builds process groups for its pool ("world") and for every
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

namespace rlcore::runtime {

// The controller's c10d store.
class RLCORE_API RendezvousStore {
 public:
  // A TCPStore server listening on `port` (0: any free port) of every
  // interface: libtorch cannot bind it to one, and it has no authentication,
  // so keep the port reachable only from the workers' network. Throws IoError.
  RendezvousStore(const std::string& host, int port, std::chrono::milliseconds timeout);
  // A FileStore in a fresh directory only this user can enter, removed with
  // the store: for runs on one host, where nothing needs to listen at all.
  static std::unique_ptr<RendezvousStore> on_this_host();
  ~RendezvousStore();
  int port() const;          // 0 for the file store
  std::string file() const;  // empty for the TCP store

 private:
  RendezvousStore();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct ProcessGroupOptions {
  std::string store_host;
  int store_port = 0;
  std::string store_file;  // set: join a FileStore instead, and Gloo listens on loopback
  std::string prefix;      // unique per pool, so pools rendezvous separately
  int64_t rank = 0;        // rank in the pool
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

// A group of workers from any pools, joined through the same store as their
// pools' groups (`options`' store, timeout and device backend; its prefix,
// rank, world size and mesh are not read): every member calls it with the
// same `name` and `size`, each with its own `rank` in the group. Throws Error
// naming the group and the rank on failure.
RLCORE_API CommGroup join_shared_group(const ProcessGroupOptions& options, const std::string& name, int64_t rank,
                                       int64_t size);

// The local IP address this host uses to reach `host` (no packet is sent).
RLCORE_API std::string local_address_towards(const std::string& host);

}  // namespace rlcore::runtime
