// What a plugin sees of the workers it runs with: its ranks, and c10d process
// groups for the whole pool ("world") and for each dimension of the pool's mesh
// ("dp", "tp", "pp", ...). Built by the worker runtime; plugins only read it.
//
// The blocking collectives below cover the common cases; for anything else,
// include <torch/csrc/distributed/c10d/ProcessGroup.hpp> and use backend().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/export.h"

namespace c10d {
class ProcessGroup;
}

namespace rlcore {

// One process group: the workers that run collectives together.
class RLCORE_API CommGroup {
 public:
  // `ranks`: pool ranks of the members in group-rank order; `backend` may be
  // null for a single-member group. `device_backend` names what carries its
  // CUDA tensors ("nccl", "gloo"; empty: host tensors only).
  CommGroup(std::string name, const c10::intrusive_ptr<c10d::ProcessGroup>& backend, std::vector<int64_t> ranks,
            int64_t rank, std::string device_backend = "");
  // A group without a backend: only valid with a single member (collectives are no-ops).
  CommGroup(std::string name, std::vector<int64_t> ranks, int64_t rank);
  ~CommGroup();
  CommGroup(const CommGroup&);
  CommGroup& operator=(const CommGroup&);

  const std::string& name() const;
  int64_t rank() const;  // this worker's rank in the group
  int64_t size() const;
  const std::vector<int64_t>& ranks() const;
  // The c10d group; ValueError when the group has no backend.
  c10d::ProcessGroup& backend() const;
  // "nccl", "gloo", or empty when the group carries host tensors only.
  const std::string& device_backend() const;
  // The same members and backends under another name.
  CommGroup renamed(std::string name) const;

  // In place, summed over the group.
  void all_reduce(at::Tensor& tensor) const;
  // In place, from group rank `root`.
  void broadcast(at::Tensor& tensor, int64_t root) const;
  // One tensor per group rank, each shaped like `tensor`.
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor) const;
  // Every rank's `input` concatenated in rank order into `output` (1-D,
  // contiguous, size() * input.numel() elements of input's dtype): for CUDA
  // tensors over NCCL one all-gather writing `output` itself; over Gloo its
  // chunks (Gloo stages the gather in a buffer of its own). Since SDK 4.4.
  void all_gather_into(const at::Tensor& input, at::Tensor& output) const;
  // This rank's chunk of the sum of `input` (1-D, size() equal chunks), in
  // `output`: NCCL's reduce-scatter for CUDA tensors, else an all-reduce of a
  // copy and a slice (Gloo in libtorch 1.13 has no reduce-scatter).
  void reduce_scatter(const at::Tensor& input, at::Tensor& output) const;
  // Rows (dim 0) of `input`, split by `send_rows` (one count per group rank,
  // summing to input.size(0)), each run sent to its rank; returns the rows
  // received, concatenated in rank order, `recv_rows[r]` from rank r (the
  // caller knows them, e.g. from an all_to_all of the counts). c10d's
  // alltoall_base (Gloo and NCCL); ValueError when a count list has the wrong
  // length or sum. Since SDK 6.1.
  at::Tensor all_to_all(const at::Tensor& input, const std::vector<int64_t>& send_rows,
                        const std::vector<int64_t>& recv_rows) const;
  void barrier() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

class RLCORE_API CommContext {
 public:
  // `mesh`: (dimension name, size) in layout order. Every dimension and "world" has a group.
  CommContext(int64_t rank, int64_t world_size, int64_t local_rank, std::vector<std::pair<std::string, int64_t>> mesh,
              std::vector<CommGroup> groups);
  ~CommContext();

  int64_t rank() const;        // rank in the pool
  int64_t world_size() const;  // workers in the pool
  int64_t local_rank() const;  // rank on this host
  const std::vector<std::pair<std::string, int64_t>>& mesh() const;

  bool has_group(const std::string& name) const;
  // ValueError listing the groups when there is no such group.
  const CommGroup& group(const std::string& name) const;
  const CommGroup& world() const { return group("world"); }
  std::vector<std::string> group_names() const;

 private:
  int64_t rank_;
  int64_t world_size_;
  int64_t local_rank_;
  std::vector<std::pair<std::string, int64_t>> mesh_;
  std::vector<CommGroup> groups_;
};

}  // namespace rlcore
