// The data-parallel group the engine shards over: the context's "dp" group,
// else "world", else a single process (every collective is then local).
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace rlcore {
class CommContext;
class CommGroup;
}  // namespace rlcore

namespace rlcore::fsdp {

class DpComm {
 public:
  explicit DpComm(const CommContext* comm);

  int64_t size() const;
  int64_t rank() const;
  // In place, summed over the group.
  void all_reduce_sum(at::Tensor& tensor) const;
  // Every rank's 1-D `shard` (equal sizes), concatenated in rank order.
  at::Tensor all_gather_flat(const at::Tensor& shard) const;
  void barrier() const;

 private:
  const CommGroup* group_ = nullptr;
};

}  // namespace rlcore::fsdp
