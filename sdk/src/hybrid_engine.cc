// Anchors the hybrid-engine interfaces' vtables in librlcore_sdk (so
// dynamic_cast across plugins sees one type), the ledger and the RAII scope.
#include <algorithm>

#include "rlcore/sharding_manager.h"

namespace rlcore {

WeightAdaptor::~WeightAdaptor() = default;
Offloader::~Offloader() = default;
ShardingManager::~ShardingManager() = default;

void MemoryLedger::set(const std::string& category, int64_t bytes) {
  live_[category] = bytes;
  peak_ = std::max(peak_, live());
}

int64_t MemoryLedger::live() const {
  int64_t total = 0;
  for (const auto& entry : live_) total += entry.second;
  return total;
}

RolloutScope::RolloutScope(ShardingManager& manager, int64_t version)
    : manager_(manager), entered_(manager.to_rollout(version)) {}

RolloutScope::~RolloutScope() {
  if (finished_) return;
  try {
    manager_.to_train();
  } catch (...) {
    // Unwinding already, or the caller chose not to call finish(): nothing to report to.
  }
}

SwapStats RolloutScope::finish() {
  finished_ = true;
  return manager_.to_train();
}

}  // namespace rlcore
