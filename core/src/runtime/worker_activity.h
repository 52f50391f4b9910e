// Private to the core: what a worker is doing, as its I/O thread tells the
// controller when asked (a probe) while the main thread may be stuck: the
// method it runs and how far it got in each process group (the collective
// ledger). Groups are named run-wide: "<pool>/<name>/<members>" for a pool's
// groups, "shared/<name>" for groups joined with other pools.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "rlcore/collective_ledger.h"

namespace rlcore::runtime::detail {

class WorkerActivity {
 public:
  // From the controller's welcome.
  void set_pool(const std::string& pool);
  // `name` was joined with workers of other pools (join_shared_group).
  void joined_shared_group(const std::string& name);
  void method_started(const std::string& method);
  void method_ended();

  // {"method", "method_s" (absent when idle), "groups": [{"key", "group",
  // "rank", "size", "started", "op", "running", "failed"}]}.
  nlohmann::json probe() const;
  // The collective a failed method failed in: {"key", "group", "number", "op"}
  // of the group whose last collective failed most recently; null if none did.
  nlohmann::json failed_collective() const;

 private:
  std::string key_of(const CollectiveRecord& record) const;

  mutable std::mutex mutex_;
  std::string pool_;
  std::set<std::string> shared_groups_;
  std::optional<std::string> method_;
  std::chrono::steady_clock::time_point method_start_;
};

}  // namespace rlcore::runtime::detail
