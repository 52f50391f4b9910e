// The collective ledger (see rlcore/collective_ledger.h): one entry per live
// process group, behind one mutex; a collective takes it twice, which costs
// nothing next to the collective itself.
#include "rlcore/collective_ledger.h"

#include <chrono>
#include <map>
#include <mutex>

#include "collective_ledger_internal.h"

namespace rlcore {
namespace detail {

using Clock = std::chrono::steady_clock;

struct LedgerEntry {
  CollectiveRecord record;
  Clock::time_point started_at;
};

namespace {

struct Ledger {
  std::mutex mutex;
  std::map<const void*, std::weak_ptr<LedgerEntry>> entries;  // by c10d group
};

Ledger& ledger() {
  static Ledger* instance = new Ledger();  // never destroyed: groups may outlive static destruction
  return *instance;
}

}  // namespace

std::shared_ptr<LedgerEntry> ledger_entry(const void* backend, const std::string& name,
                                          const std::vector<int64_t>& ranks, int64_t rank) {
  Ledger& all = ledger();
  std::lock_guard<std::mutex> lock(all.mutex);
  if (auto live = all.entries[backend].lock()) return live;
  auto entry = std::make_shared<LedgerEntry>();
  entry->record.group = name;
  entry->record.ranks = ranks;
  entry->record.rank = rank;
  all.entries[backend] = entry;
  return entry;
}

CollectiveInFlight::CollectiveInFlight(LedgerEntry& entry, const std::string& name, const char* op) : entry_(entry) {
  std::lock_guard<std::mutex> lock(ledger().mutex);
  CollectiveRecord& record = entry_.record;
  record.group = name;
  record.op = op;
  ++record.started;
  record.running = true;
  record.failed = false;
  entry_.started_at = Clock::now();
}

CollectiveInFlight::~CollectiveInFlight() {
  std::lock_guard<std::mutex> lock(ledger().mutex);
  entry_.record.running = false;
  entry_.record.failed = failed_;
}

void CollectiveInFlight::failed() { failed_ = true; }

}  // namespace detail

std::vector<CollectiveRecord> collective_ledger() {
  detail::Ledger& all = detail::ledger();
  std::lock_guard<std::mutex> lock(all.mutex);
  std::vector<CollectiveRecord> records;
  const auto now = detail::Clock::now();
  for (auto it = all.entries.begin(); it != all.entries.end();) {
    const auto entry = it->second.lock();
    if (!entry) {
      it = all.entries.erase(it);
      continue;
    }
    CollectiveRecord record = entry->record;
    if (record.started > 0) record.seconds = std::chrono::duration<double>(now - entry->started_at).count();
    records.push_back(std::move(record));
    ++it;
  }
  return records;
}

}  // namespace rlcore
