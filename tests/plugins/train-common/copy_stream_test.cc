// The copy stream that offload and reload go through (train-common), on the
// CPU: copies are synchronous, distinct buffers and fenced by nothing. Its GPU
// side (a side stream, fences, pinned memory) is tests/cuda's.
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include "train-common/copy_stream.h"
#include "train-common/shard_state.h"

TEST_CASE("on the CPU the copy stream copies at once, into distinct buffers", "[offload]") {
  rlcore::train_common::CopyStream copies{at::Device(at::kCPU)};
  CHECK_FALSE(copies.side_stream().has_value());
  const at::Tensor source = at::arange(16, at::kFloat);
  const at::Tensor host = copies.to_host(source);
  CHECK(host.data_ptr() != source.data_ptr());
  CHECK(at::equal(host, source));
  rlcore::train_common::CopyFence fence;
  const at::Tensor back = copies.to_device(host, fence);
  CHECK_FALSE(fence.pending());
  CHECK(back.data_ptr() != host.data_ptr());
  CHECK(at::equal(back, source));
}

TEST_CASE("reload brings parameters back first, offload parks only what it names", "[offload]") {
  rlcore::train_common::CopyStream copies{at::Device(at::kCPU)};
  std::vector<rlcore::train_common::ShardState> states(2);
  for (rlcore::train_common::ShardState& state : states) {
    state.param.device() = at::ones({4});
    state.exp_avg.device() = at::full({4}, 2.0);
    state.exp_avg_sq.device() = at::full({4}, 3.0);
  }
  const std::vector<rlcore::train_common::ShardState*> all = {&states[0], &states[1]};
  rlcore::train_common::offload_states(all, rlcore::OffloadSet::kParams | rlcore::OffloadSet::kOptimizer, copies);
  for (const rlcore::train_common::ShardState& state : states) {
    CHECK(state.param.offloaded());
    CHECK(state.exp_avg.offloaded());
    CHECK(state.param.device_bytes() == 0);
    CHECK(state.param.host_bytes() == 16);
    CHECK_FALSE(state.grad.defined());  // never had one: nothing to move
  }
  rlcore::train_common::reload_states(all, rlcore::OffloadSet::kParams, copies);
  for (rlcore::train_common::ShardState& state : states) {
    CHECK_FALSE(state.param.offloaded());
    CHECK(at::equal(state.param.device(), at::ones({4})));
    CHECK(state.exp_avg.offloaded());  // not named
  }
  rlcore::train_common::reload_states(all, rlcore::OffloadSet::kOptimizer, copies);
  CHECK(at::equal(states[1].exp_avg_sq.device(), at::full({4}, 3.0)));
}
