// Moving a Placed tensor between device and host memory.
#include "shard_state.h"

#include <ATen/ATen.h>

namespace rlcore::fsdp {

void Placed::offload() {
  if (!device.defined()) return;
  host = device.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
  device = at::Tensor();
}

void Placed::reload(const at::Device& to) {
  if (!host.defined()) return;
  device = host.to(to, /*non_blocking=*/false, /*copy=*/true);
  host = at::Tensor();
}

int64_t Placed::device_bytes() const { return device.defined() ? static_cast<int64_t>(device.nbytes()) : 0; }
int64_t Placed::host_bytes() const { return host.defined() ? static_cast<int64_t>(host.nbytes()) : 0; }

}  // namespace rlcore::fsdp
