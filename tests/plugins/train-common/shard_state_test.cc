// An engine's offload bookkeeping (train-common/shard_state.h), on the CPU:
// what a StatePlacement has moved, what a ResidentScope brings back and parks
// again, and the bytes a ShardState counts.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include "train-common/shard_state.h"

TEST_CASE("a state placement remembers what it offloaded, and a resident scope restores it", "[offload]") {
  std::vector<rlcore::train_common::ShardState> states(2);
  for (rlcore::train_common::ShardState& state : states) {
    state.param.device() = at::ones({4});
    state.grad.device() = at::zeros({4});
  }
  rlcore::train_common::StatePlacement placement(at::Device(at::kCPU), [&] {
    return std::vector<rlcore::train_common::ShardState*>{&states[0], &states[1]};
  });
  CHECK(placement.offloaded() == rlcore::OffloadSet::kNone);
  placement.offload(rlcore::OffloadSet::kAll);
  CHECK(placement.offloaded() == rlcore::OffloadSet::kAll);
  CHECK(states[1].param.offloaded());
  {
    const rlcore::train_common::ResidentScope resident(placement, rlcore::OffloadSet::kParams);
    CHECK_FALSE(states[0].param.offloaded());
    CHECK(states[0].grad.offloaded());  // not needed: left where it was
    CHECK(placement.offloaded() == (rlcore::OffloadSet::kGrads | rlcore::OffloadSet::kOptimizer));
  }
  CHECK(placement.offloaded() == rlcore::OffloadSet::kAll);
  CHECK(states[0].param.offloaded());
  placement.reload(rlcore::OffloadSet::kAll);
  CHECK(placement.offloaded() == rlcore::OffloadSet::kNone);
  {
    // Nothing offloaded: the scope moves nothing, and parks nothing at its end.
    const rlcore::train_common::ResidentScope resident(placement, rlcore::OffloadSet::kAll);
  }
  CHECK_FALSE(states[0].param.offloaded());
  CHECK(at::equal(states[1].param.device(), at::ones({4})));
}

TEST_CASE("a shard state counts its bytes by kind and place", "[offload]") {
  rlcore::train_common::CopyStream copies{at::Device(at::kCPU)};
  rlcore::train_common::ShardState state;
  state.param.device() = at::ones({4});        // 16 bytes
  state.grad.device() = at::zeros({2});        // 8
  state.exp_avg.device() = at::zeros({4});     // 16
  state.exp_avg_sq.device() = at::zeros({4});  // 16
  rlcore::TrainMemory memory;
  state.count_bytes(memory);
  CHECK(memory.param_bytes == 16);
  CHECK(memory.grad_bytes == 8);
  CHECK(memory.optimizer_bytes == 32);
  CHECK(memory.host_bytes == 0);
  state.exp_avg.offload(copies);
  rlcore::TrainMemory more;
  state.count_bytes(more);
  state.count_bytes(more);  // adds
  CHECK(more.optimizer_bytes == 32);
  CHECK(more.host_bytes == 32);
}
