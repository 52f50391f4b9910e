// DpComm over rlcore::CommGroup.
#include "dp_comm.h"

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "rlcore/comm_context.h"

namespace rlcore::train_fsdp {

DpComm::DpComm(const CommContext* comm, bool whole_pool) {
  if (comm == nullptr) return;
  group_ = comm->has_group("dp") && !whole_pool ? &comm->group("dp") : &comm->world();
  if (group_->size() == 1) {
    group_ = nullptr;
    return;
  }
  sums_16bit_ = group_->device_backend() == "nccl";
}

int64_t DpComm::size() const { return group_ ? group_->size() : 1; }
int64_t DpComm::rank() const { return group_ ? group_->rank() : 0; }

void DpComm::all_reduce_sum(at::Tensor& tensor) const {
  if (group_) group_->all_reduce(tensor);
}

void DpComm::all_reduce_mean(at::Tensor& tensor, at::ScalarType dtype) const {
  if (dtype == tensor.scalar_type()) {
    all_reduce_sum(tensor);
  } else if (sums_16bit_ && tensor.is_cuda()) {
    at::Tensor low = tensor.to(dtype);
    all_reduce_sum(low);
    tensor.copy_(low);
  } else {
    tensor.copy_(tensor.to(dtype));
    all_reduce_sum(tensor);
    tensor.copy_(tensor.to(dtype));
  }
  if (size() > 1) tensor.div_(static_cast<double>(size()));
}

at::Tensor DpComm::reduce_scatter_mean(at::Tensor& full, at::ScalarType dtype) const {
  const int64_t shard = full.numel() / size();
  if (group_ != nullptr && full.is_cuda() && group_->device_backend() == "nccl") {
    // NCCL sums in `dtype` itself and hands each rank only its chunk.
    const at::Tensor low = full.to(dtype);
    at::Tensor chunk = at::empty({shard}, low.options());
    group_->reduce_scatter(low, chunk);
    return chunk.to(full.scalar_type()).div_(static_cast<double>(size()));
  }
  all_reduce_mean(full, dtype);
  return full.narrow(0, rank() * shard, shard);
}

at::Tensor DpComm::all_gather_flat(const at::Tensor& shard) const {
  if (!group_) return shard;
  at::Tensor full = at::empty({shard.numel() * size()}, shard.options());
  all_gather_into(shard, full);
  return full;
}

void DpComm::all_gather_into(const at::Tensor& shard, at::Tensor output) const {
  if (!group_) {
    output.copy_(shard);  // rounds on the fly: no converted temporary
    return;
  }
  at::Tensor mine = shard.to(output.scalar_type()).contiguous();
  // Gathering only moves bytes: bf16 travels as fp16 bits, which Gloo can carry and bf16 it cannot.
  if (output.scalar_type() == at::kBFloat16) {
    at::Tensor bits = output.view(at::kHalf);
    group_->all_gather_into(mine.view(at::kHalf), bits);
    return;
  }
  group_->all_gather_into(mine, output);
}

void DpComm::barrier() const {
  if (group_) group_->barrier();
}

}  // namespace rlcore::train_fsdp
