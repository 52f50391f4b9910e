// NCCL for a process group's CUDA tensors. cuda_nccl_backend.cc implements it
// in the CUDA flavour; no_cuda_nccl_backend.cc says this build has no NCCL.
#pragma once

#include <chrono>
#include <string>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace rlcore::device {

// Registers an NCCL backend for CUDA tensors on `group`, rendezvousing through
// `store` (already scoped to the group). `name` labels NCCL's own logs and errors.
void add_nccl_backend(c10d::ProcessGroup& group, const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      std::chrono::milliseconds timeout, const std::string& name);

}  // namespace rlcore::device
