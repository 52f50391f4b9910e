// The data-parallel group the engine shards over: the context's "dp" group,
// else (and always with sequence parallelism) "world", else a single process
// (every collective is then local).
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

namespace rlcore {
class CommContext;
class CommGroup;
}  // namespace rlcore

namespace rlcore::train_fsdp {

class DpComm {
 public:
  // The pool's "dp" group when it has one (a model-parallel pool's replicas),
  // else every worker; `whole_pool`: every worker regardless (a pool with
  // sequence-parallel groups shards over the sp ranks of a replica too).
  explicit DpComm(const CommContext* comm, bool whole_pool = false);

  int64_t size() const;
  int64_t rank() const;
  // In place, summed over the group.
  void all_reduce_sum(at::Tensor& tensor) const;
  // In place, `tensor` (fp32) averaged over the group at the precision of
  // `dtype`: summed in `dtype` where the backend can (NCCL), else each rank's
  // value and the sum are rounded to `dtype` around an fp32 sum (Gloo has no
  // bf16 sum). Rounded the same way with one rank, so results do not depend
  // on the group's size.
  void all_reduce_mean(at::Tensor& tensor, at::ScalarType dtype) const;
  // This rank's slice of `full` (fp32, size() equal slices) averaged over the
  // group at the precision of `dtype`: a reduce-scatter on NCCL; on Gloo
  // (libtorch 1.13's has none) `full` is all-reduced in place and a view of
  // the slice returned.
  at::Tensor reduce_scatter_mean(at::Tensor& full, at::ScalarType dtype) const;
  // Every rank's 1-D `shard` (equal sizes, any dtype), concatenated in rank order.
  at::Tensor all_gather_flat(const at::Tensor& shard) const;
  // The same into `output` (1-D, contiguous, size() x shard elements), in
  // output's dtype (each rank's shard is rounded to it before the gather).
  void all_gather_into(const at::Tensor& shard, at::Tensor output) const;
  void barrier() const;

 private:
  const CommGroup* group_ = nullptr;
  bool sums_16bit_ = false;  // the backend sums bf16/fp16 CUDA tensors itself (NCCL)
};

}  // namespace rlcore::train_fsdp
