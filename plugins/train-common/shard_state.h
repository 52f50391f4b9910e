// One unit's training state on this rank (fp32 master shard, gradient shard,
// AdamW moments), each either resident on the device or parked in host memory,
// and an engine's offload bookkeeping over all of its states.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "copy_stream.h"
#include "rlcore/train_engine.h"

namespace rlcore::train_common {

// A tensor that lives on the device or, while offloaded, as a separate host
// copy. A reload may still be in flight on the copy stream: device() makes the
// compute stream wait for it, so every use of the tensor goes through device().
class Placed {
 public:
  at::Tensor& device() {
    ready_.wait();
    return device_;
  }
  const at::Tensor& device() const {
    ready_.wait();
    return device_;
  }
  bool defined() const { return device_.defined() || host_.defined(); }
  bool offloaded() const { return host_.defined(); }
  // The live tensor wherever it is (for reads that need no particular place).
  const at::Tensor& any() const { return device_.defined() ? device() : host_; }
  // device -> host (a distinct buffer even when the device is the CPU); the
  // host copy is complete after copies.synchronize().
  void offload(CopyStream& copies);
  // host -> device, overlapping whatever the compute stream runs meanwhile.
  void reload(CopyStream& copies);
  int64_t device_bytes() const;
  int64_t host_bytes() const;

 private:
  at::Tensor device_;
  at::Tensor host_;
  mutable CopyFence ready_;
};

struct ShardState {
  Placed param;       // [shard_size] fp32 master
  Placed grad;        // [shard_size] fp32, summed micro-batch gradients; trainable only
  Placed exp_avg;     // AdamW first moment; trainable only
  Placed exp_avg_sq;  // AdamW second moment; trainable only

  // Adds this state's bytes to `memory`: on the device by kind, in host memory in all.
  void count_bytes(TrainMemory& memory) const;
};

// Moves the parts `what` names of every state to host memory, and waits until
// the copies are complete (the device memory is then free).
void offload_states(const std::vector<ShardState*>& states, OffloadSet what, CopyStream& copies);
// Starts moving them back and returns at once: the parameters of every state
// first, in the order given (the order compute needs them), then gradients and
// optimizer moments, which the optimizer step needs last.
void reload_states(const std::vector<ShardState*>& states, OffloadSet what, CopyStream& copies);

// An engine's offload (OffloadsState): moves its states through its own copy
// stream and remembers which parts are in host memory.
class StatePlacement {
 public:
  // `states` lists the engine's states in the order compute needs them; it is
  // asked on every move.
  StatePlacement(const at::Device& device, std::function<std::vector<ShardState*>()> states);

  void offload(OffloadSet what);  // offload_states; `what` is then offloaded
  void reload(OffloadSet what);   // reload_states; `what` is then resident
  OffloadSet offloaded() const { return offloaded_; }

 private:
  std::function<std::vector<ShardState*>()> states_;
  CopyStream copies_;  // beside the compute stream
  OffloadSet offloaded_ = OffloadSet::kNone;
};

// Brings the offloaded parts of `needed` back for the scope and parks them
// again at its end, so the engine's offload state survives every call.
class ResidentScope {
 public:
  ResidentScope(StatePlacement& placement, OffloadSet needed);
  ~ResidentScope();
  ResidentScope(const ResidentScope&) = delete;
  ResidentScope& operator=(const ResidentScope&) = delete;

 private:
  StatePlacement& placement_;
  OffloadSet moved_;
};

}  // namespace rlcore::train_common
