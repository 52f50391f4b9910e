// Helpers for the GPU tests (ctest label `cuda`, scripts/gpu-check.sh): they
// need a CUDA build and a visible GPU, and fail, never skip, without them.
#pragma once

#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "rlcore/comm_context.h"
#include "rlcore/core/runtime/process_groups.h"
#include "rlcore/device.h"

namespace cuda_test {

// cuda:0, or a failed test saying why there is none.
inline at::Device require_gpu() {
  INFO("the cuda tests need a CUDA build of rlcore and a visible GPU (docs/gpu.md)");
  REQUIRE(rlcore::cuda_build());
  REQUIRE(rlcore::cuda_device_count() > 0);
  // Exact fp32 matmuls, so CPU and GPU agree to fp32 rounding, not TF32's.
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
  return rlcore::resolve_device("cuda", 0, "test");
}

// This rank's process groups over `store` (ranks are threads of the test), CUDA
// tensors through `backend` ("nccl", or "gloo" for ranks sharing one GPU).
inline std::unique_ptr<rlcore::CommContext> join(const rlcore::runtime::RendezvousStore& store,
                                                 const std::string& prefix, int64_t rank, int64_t world,
                                                 const std::string& backend) {
  rlcore::runtime::ProcessGroupOptions options;
  options.store_host = "127.0.0.1";
  options.store_port = store.port();
  options.prefix = prefix;
  options.rank = rank;
  options.world_size = world;
  options.local_address = "127.0.0.1";
  options.timeout = std::chrono::seconds(60);
  options.device_backend = backend;
  return rlcore::runtime::make_comm_context(options);
}

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  return (a.to(at::kCPU, at::kDouble) - b.to(at::kCPU, at::kDouble)).abs().max().item<double>();
}

}  // namespace cuda_test
