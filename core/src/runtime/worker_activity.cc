// What a worker is doing (see worker_activity.h).
#include "runtime/worker_activity.h"

#include "rlcore/string_join.h"

namespace rlcore::runtime::detail {

void WorkerActivity::set_pool(const std::string& pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  pool_ = pool;
}

void WorkerActivity::joined_shared_group(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  shared_groups_.insert(name);
}

void WorkerActivity::method_started(const std::string& method) {
  std::lock_guard<std::mutex> lock(mutex_);
  method_ = method;
  method_start_ = std::chrono::steady_clock::now();
}

void WorkerActivity::method_ended() {
  std::lock_guard<std::mutex> lock(mutex_);
  method_.reset();
}

std::string WorkerActivity::key_of(const CollectiveRecord& record) const {
  if (shared_groups_.count(record.group)) return "shared/" + record.group;
  return pool_ + "/" + record.group + "/" + join(record.ranks, ",", [](int64_t r) { return std::to_string(r); });
}

nlohmann::json WorkerActivity::probe() const {
  const std::vector<CollectiveRecord> records = collective_ledger();
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json state;
  if (method_) {
    state["method"] = *method_;
    state["method_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - method_start_).count();
  }
  state["groups"] = nlohmann::json::array();
  for (const auto& record : records) {
    state["groups"].push_back({{"key", key_of(record)},
                               {"group", record.group},
                               {"rank", record.rank},
                               {"size", record.ranks.size()},
                               {"started", record.started},
                               {"op", record.op},
                               {"running", record.running},
                               {"failed", record.failed}});
  }
  return state;
}

nlohmann::json WorkerActivity::failed_collective() const {
  const std::vector<CollectiveRecord> records = collective_ledger();
  std::lock_guard<std::mutex> lock(mutex_);
  const CollectiveRecord* latest = nullptr;
  for (const auto& record : records) {
    if (record.failed && (!latest || record.seconds < latest->seconds)) latest = &record;
  }
  if (!latest) return nullptr;
  return {{"key", key_of(*latest)}, {"group", latest->group}, {"number", latest->started}, {"op", latest->op}};
}

}  // namespace rlcore::runtime::detail
