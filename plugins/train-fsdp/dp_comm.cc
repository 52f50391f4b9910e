// DpComm over rlcore::CommGroup.
#include "dp_comm.h"

#include <ATen/ATen.h>

#include "rlcore/comm_context.h"

namespace rlcore::fsdp {

DpComm::DpComm(const CommContext* comm) {
  if (comm == nullptr) return;
  group_ = comm->has_group("dp") ? &comm->group("dp") : &comm->world();
  if (group_->size() == 1) group_ = nullptr;
}

int64_t DpComm::size() const { return group_ ? group_->size() : 1; }
int64_t DpComm::rank() const { return group_ ? group_->rank() : 0; }

void DpComm::all_reduce_sum(at::Tensor& tensor) const {
  if (group_) group_->all_reduce(tensor);
}

at::Tensor DpComm::all_gather_flat(const at::Tensor& shard) const {
  if (!group_) return shard;
  return at::cat(group_->all_gather(shard.contiguous()));
}

void DpComm::barrier() const {
  if (group_) group_->barrier();
}

}  // namespace rlcore::fsdp
