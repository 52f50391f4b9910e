// The controller's side of a standalone rollout pool (see rollout_pool.h).
#include "trainer/rollout_pool.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <vector>

#include "rlcore/elapsed_seconds.h"
#include "workers/worker_contract.h"

namespace rlcore::trainer {
namespace {

constexpr const char* kBridgeName = "actor_to_rollout";

}  // namespace

RolloutPool::RolloutPool(runtime::WorkerGroup& actor, runtime::WorkerGroup& rollout, int64_t bucket_bytes)
    : actor_(actor), rollout_(rollout), bucket_bytes_(bucket_bytes) {
  const workers::JoinBridgeArgs bridge{kBridgeName, 1 + rollout.size()};
  std::vector<std::future<runtime::CallOutput>> joins;
  joins.push_back(workers::call(actor_, workers::actor_methods::kJoinBridge, Batch(), bridge));
  joins.push_back(workers::call(rollout_, workers::rollout_methods::kJoinBridge, Batch(), bridge));
  runtime::wait_all(joins);
}

void RolloutPool::sync(int64_t version, StepMetrics& metrics) {
  if (version == version_) return;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<runtime::CallOutput>> calls;
  calls.push_back(workers::call(actor_, workers::actor_methods::kSendWeights, Batch(), {bucket_bytes_}));
  calls.push_back(workers::call(rollout_, workers::rollout_methods::kReceiveWeights, Batch(), {version}));
  const std::vector<runtime::CallOutput> outputs = runtime::wait_all(calls);
  const double seconds = seconds_since(start);
  double bytes = 0;
  for (const auto& reply : outputs.front().replies) {
    bytes = std::max(bytes, static_cast<double>(workers::reply_of(workers::actor_methods::kSendWeights, reply).bytes));
  }
  version_ = version;
  metrics["timing_s/sync_rollout_weights"] = seconds;
  metrics["perf/weight_sync_bytes"] = bytes;
  metrics["perf/weight_sync_GBps"] = seconds > 0 ? bytes / seconds / 1e9 : 0.0;
}

}  // namespace rlcore::trainer
