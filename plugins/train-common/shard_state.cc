// Moving training state between device and host memory through a CopyStream.
#include "shard_state.h"

#include <utility>

namespace rlcore::train_common {

void Placed::offload(CopyStream& copies) {
  if (!device_.defined()) return;
  host_ = copies.to_host(device());
  device_ = at::Tensor();
}

void Placed::reload(CopyStream& copies) {
  if (!host_.defined()) return;
  device_ = copies.to_device(host_, ready_);
  host_ = at::Tensor();
}

int64_t Placed::device_bytes() const { return device_.defined() ? static_cast<int64_t>(device_.nbytes()) : 0; }
int64_t Placed::host_bytes() const { return host_.defined() ? static_cast<int64_t>(host_.nbytes()) : 0; }

void ShardState::count_bytes(TrainMemory& memory) const {
  memory.param_bytes += param.device_bytes();
  memory.grad_bytes += grad.device_bytes();
  memory.optimizer_bytes += exp_avg.device_bytes() + exp_avg_sq.device_bytes();
  memory.host_bytes += param.host_bytes() + grad.host_bytes() + exp_avg.host_bytes() + exp_avg_sq.host_bytes();
}

void offload_states(const std::vector<ShardState*>& states, OffloadSet what, CopyStream& copies) {
  for (ShardState* state : states) {
    if (contains(what, OffloadSet::kParams)) state->param.offload(copies);
    if (contains(what, OffloadSet::kGrads)) state->grad.offload(copies);
    if (contains(what, OffloadSet::kOptimizer)) {
      state->exp_avg.offload(copies);
      state->exp_avg_sq.offload(copies);
    }
  }
  copies.synchronize();
}

void reload_states(const std::vector<ShardState*>& states, OffloadSet what, CopyStream& copies) {
  if (contains(what, OffloadSet::kParams)) {
    for (ShardState* state : states) state->param.reload(copies);
  }
  for (ShardState* state : states) {
    if (contains(what, OffloadSet::kGrads)) state->grad.reload(copies);
    if (contains(what, OffloadSet::kOptimizer)) {
      state->exp_avg.reload(copies);
      state->exp_avg_sq.reload(copies);
    }
  }
}

StatePlacement::StatePlacement(const at::Device& device, std::function<std::vector<ShardState*>()> states)
    : states_(std::move(states)), copies_(device) {}

void StatePlacement::offload(OffloadSet what) {
  offload_states(states_(), what, copies_);
  offloaded_ = offloaded_ | what;
}

void StatePlacement::reload(OffloadSet what) {
  reload_states(states_(), what, copies_);
  offloaded_ = static_cast<OffloadSet>(static_cast<unsigned>(offloaded_) & ~static_cast<unsigned>(what));
}

ResidentScope::ResidentScope(StatePlacement& placement, OffloadSet needed)
    : placement_(placement),
      moved_(static_cast<OffloadSet>(static_cast<unsigned>(needed) & static_cast<unsigned>(placement.offloaded()))) {
  placement_.reload(moved_);
}

ResidentScope::~ResidentScope() { placement_.offload(moved_); }

}  // namespace rlcore::train_common
