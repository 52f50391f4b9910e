// The controller's side of a standalone rollout pool (see rollout_pool.h).
#include "trainer/rollout_pool.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "rlcore/elapsed_seconds.h"
#include "workers/worker_contract.h"

namespace rlcore::trainer {
namespace {

constexpr const char* kBridgeName = "actor_to_rollout";

}  // namespace

RolloutPool::RolloutPool(runtime::WorkerGroup& actor, runtime::WorkerGroup& rollout, int64_t bucket_bytes)
    : actor_(actor), rollout_(rollout), bucket_bytes_(bucket_bytes), synced_(incarnations()) {
  join_bridge();
}

std::vector<int64_t> RolloutPool::incarnations() const {
  std::vector<int64_t> each;
  for (int64_t rank = 0; rank < rollout_.size(); ++rank) each.push_back(rollout_.incarnation(rank));
  return each;
}

void RolloutPool::join_bridge() {
  // A re-formed bridge takes a new name: the store still holds the old one's rendezvous.
  const std::string name =
      bridge_generation_ == 0 ? kBridgeName : kBridgeName + std::string(".") + std::to_string(bridge_generation_);
  const workers::JoinBridgeArgs bridge{name, 1 + rollout_.size()};
  std::vector<std::future<runtime::CallOutput>> joins;
  joins.push_back(workers::call(actor_, workers::actor_methods::kJoinBridge, Batch(), bridge));
  joins.push_back(workers::call(rollout_, workers::rollout_methods::kJoinBridge, Batch(), bridge));
  runtime::wait_all(joins);
}

std::vector<int64_t> RolloutPool::serving() const {
  const std::vector<int64_t> lost = rollout_.lost_ranks();
  const std::vector<int64_t> now = incarnations();
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int64_t> ranks;
  for (int64_t rank = 0; rank < rollout_.size(); ++rank) {
    const bool alive = std::find(lost.begin(), lost.end(), rank) == lost.end();
    if (alive && now[static_cast<size_t>(rank)] == synced_[static_cast<size_t>(rank)]) ranks.push_back(rank);
  }
  return ranks;
}

bool RolloutPool::has_down_ranks() const { return static_cast<int64_t>(serving().size()) < rollout_.size(); }

void RolloutPool::sync(int64_t version, StepMetrics& metrics) {
  const bool rejoin = has_down_ranks();
  if (version == version_ && !rejoin) return;
  const auto start = std::chrono::steady_clock::now();
  std::vector<int64_t> joined;
  if (rejoin) {
    rollout_.await_replacements();
    joined = incarnations();
    ++bridge_generation_;
    join_bridge();
    metrics["timing_s/rollout_rejoin"] = seconds_since(start);
  }
  const auto transfer_start = std::chrono::steady_clock::now();
  std::vector<std::future<runtime::CallOutput>> calls;
  calls.push_back(workers::call(actor_, workers::actor_methods::kSendWeights, Batch(), {bucket_bytes_}));
  calls.push_back(workers::call(rollout_, workers::rollout_methods::kReceiveWeights, Batch(), {version}));
  const std::vector<runtime::CallOutput> outputs = runtime::wait_all(calls);
  const double seconds = seconds_since(transfer_start);
  double bytes = 0;
  for (const auto& reply : outputs.front().replies) {
    bytes = std::max(bytes, static_cast<double>(workers::reply_of(workers::actor_methods::kSendWeights, reply).bytes));
  }
  version_ = version;
  if (rejoin) {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t replaced = 0;
    for (size_t rank = 0; rank < joined.size(); ++rank) replaced += joined[rank] != synced_[rank] ? 1 : 0;
    metrics["async/rollout_workers_replaced"] = static_cast<double>(replaced);
    synced_ = joined;
  }
  metrics["timing_s/sync_rollout_weights"] = seconds;
  metrics["perf/weight_sync_bytes"] = bytes;
  metrics["perf/weight_sync_GBps"] = seconds > 0 ? bytes / seconds / 1e9 : 0.0;
}

}  // namespace rlcore::trainer
