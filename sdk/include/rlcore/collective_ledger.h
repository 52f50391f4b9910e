// The collective ledger: how far this process got in each of its process
// groups. Each CommGroup collective is numbered per group as it starts. The
// members of a group start the same collectives in the same order, so one
// number names the same collective on every member. When a collective fails or
// times out on some members, the others' ledgers tell which members reached it
// and which never did (the controller asks every worker for its ledger:
// docs/launch.md#hung-collectives). Collectives a plugin issues on
// CommGroup::backend() directly are not counted. Since SDK 6.4.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rlcore/export.h"

namespace rlcore {

// One process group of this process (copies and renamed views of a group share one).
struct CollectiveRecord {
  std::string group;           // the group's name (at its last collective)
  std::vector<int64_t> ranks;  // its members' pool ranks, in group-rank order
  int64_t rank = 0;            // this process's rank in the group
  int64_t started = 0;         // collectives started on the group: the last one's number (0: none yet)
  std::string op;              // the last one's operation ("all_reduce", "broadcast", ...)
  bool running = false;        // the last one has not returned
  bool failed = false;         // the last one failed (an error or a timeout)
  double seconds = 0;          // since the last one started
};

// Every live group of this process with a backend. Thread-safe:
// the worker's I/O thread reads it while its main thread waits in a collective.
RLCORE_API std::vector<CollectiveRecord> collective_ledger();

}  // namespace rlcore
