// Private to the SDK: the ledger's writing side, used by CommGroup's collectives.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rlcore::detail {

struct LedgerEntry;

// The entry of the process group `backend` (shared by every CommGroup on it);
// created with the group's name and members on first use.
std::shared_ptr<LedgerEntry> ledger_entry(const void* backend, const std::string& name,
                                          const std::vector<int64_t>& ranks, int64_t rank);

// One collective, from before it is issued until it returns: numbered and
// marked running in `entry` (under the group's current `name`), then marked
// done, or failed when failed() was called.
class CollectiveInFlight {
 public:
  CollectiveInFlight(LedgerEntry& entry, const std::string& name, const char* op);
  ~CollectiveInFlight();
  CollectiveInFlight(const CollectiveInFlight&) = delete;
  CollectiveInFlight& operator=(const CollectiveInFlight&) = delete;

  void failed();

 private:
  LedgerEntry& entry_;
  bool failed_ = false;
};

}  // namespace rlcore::detail
