// One unit's training state on this rank (fp32 master shard, gradient shard,
// AdamW moments), each either resident on the device or parked in host memory.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace rlcore::train {

// A tensor that lives on the device or, while offloaded, as a separate host copy.
struct Placed {
  at::Tensor device;
  at::Tensor host;

  bool defined() const { return device.defined() || host.defined(); }
  bool offloaded() const { return host.defined(); }
  // The live tensor wherever it is (for reads that need no particular place).
  const at::Tensor& any() const { return device.defined() ? device : host; }
  void offload();  // device -> host (a distinct buffer even when the device is the CPU)
  void reload(const at::Device& to);
  int64_t device_bytes() const;
  int64_t host_bytes() const;
};

struct ShardState {
  Placed param;       // [shard_size] fp32 master
  Placed grad;        // [shard_size] fp32, summed micro-batch gradients; trainable only
  Placed exp_avg;     // AdamW first moment; trainable only
  Placed exp_avg_sq;  // AdamW second moment; trainable only
};

}  // namespace rlcore::train
