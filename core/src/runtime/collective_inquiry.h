// Private to the core: a collective failed (an error or a timeout) on a worker.
// The controller asks every worker how far it got in that process group (a
// probe, answered by the worker's I/O thread from its collective ledger) and,
// from the answers, names the members that reached the collective and those
// that never did: a hung collective is reported by who is missing from it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/core/runtime/control_message.h"

namespace rlcore::runtime::detail {

struct CollectiveInquiry {
  nlohmann::json failed;                      // {"key", "group", "number", "op"} as the failing worker reported it
  int64_t reported_by = -1;                   // its global rank
  int64_t reporter_first_rank = 0;            // the first global rank of its pool
  std::set<int64_t> asked;                    // global ranks probed
  std::map<int64_t, nlohmann::json> answers;  // global rank -> its probe state

  bool complete() const { return answers.size() >= asked.size(); }
};

struct InquiryFinding {
  std::string text;  // "collective #12 (all_reduce) over group 'world' of pool 'actor' was reached by ...; not by ..."
  std::vector<int64_t> stuck;  // global ranks that never reached it and are running a method
};

// `peers`: every admitted worker by global rank (to name them).
InquiryFinding describe(const CollectiveInquiry& inquiry, const std::map<int64_t, PeerInfo>& peers);

}  // namespace rlcore::runtime::detail
