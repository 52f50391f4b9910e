// Moving a Placed tensor between device and host memory.
#include "shard_state.h"

#include <ATen/ATen.h>

namespace rlcore::train {

void Placed::offload() {
  if (!device.defined()) return;
  if (device.is_cuda()) {
    // Pinned, so the copy back in reload() is an asynchronous DMA on the stream.
    host = at::empty(device.sizes(), device.options().device(at::kCPU).pinned_memory(true));
    host.copy_(device);
  } else {
    host = device.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
  }
  device = at::Tensor();
}

void Placed::reload(const at::Device& to) {
  if (!host.defined()) return;
  // Stream-ordered: kernels that read `device` run after the copy lands.
  device = host.to(to, /*non_blocking=*/host.is_pinned(), /*copy=*/true);
  host = at::Tensor();
}

int64_t Placed::device_bytes() const { return device.defined() ? static_cast<int64_t>(device.nbytes()) : 0; }
int64_t Placed::host_bytes() const { return host.defined() ? static_cast<int64_t>(host.nbytes()) : 0; }

}  // namespace rlcore::train
