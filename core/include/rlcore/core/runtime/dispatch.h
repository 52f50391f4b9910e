// How a WorkerGroup call reaches its workers and how their results come back
// (verl's dispatch modes): pure functions over Batches, independent of sockets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rlcore/batch.h"
#include "rlcore/export.h"

namespace rlcore::runtime {

enum class DispatchMode {
  kOneToAll,     // every rank gets the same input; one result per rank
  kAllToAll,     // rank i gets input i; one result per rank
  kDpCompute,    // the Batch is padded, split over ranks, results concatenated and unpadded
  kMeshCompute,  // like kDpCompute over a named mesh's dp ranks, results from collect ranks only
  kRankZero,     // only rank 0 runs it
};

RLCORE_API const char* to_string(DispatchMode mode);
// "one_to_all", "all_to_all", "dp_compute", "mesh_compute", "rank_zero"; ValueError otherwise.
RLCORE_API DispatchMode dispatch_mode_from_string(const std::string& name);

// A worker's place in a named mesh: which dp shard it serves, and whether the
// controller keeps its result (e.g. tp rank 0 of the last pp stage).
struct MeshRank {
  int64_t dp_rank = 0;
  int64_t dp_size = 1;
  bool collect = true;
};

// Who receives what for one call.
struct DispatchPlan {
  std::vector<int64_t> targets;  // group ranks that run the method
  std::vector<Batch> inputs;     // one per target
  std::vector<int64_t> collect;  // group ranks whose results are kept, in result order
  int64_t pad = 0;               // rows added by padding (kDpCompute, kMeshCompute)
};

// `inputs` holds one Batch (or none) for every mode but kAllToAll, which needs
// one per rank. `mesh` (kMeshCompute only) is every rank's MeshRank. Throws
// ValueError for inconsistent inputs or meshes (a dp rank nobody collects, ...).
RLCORE_API DispatchPlan plan_dispatch(DispatchMode mode, const std::vector<Batch>& inputs, int64_t world_size,
                                      const std::vector<MeshRank>& mesh = {});

// Concatenates the kept results in plan order and removes the padding; results
// without rows (methods that return only a value) give an empty Batch.
RLCORE_API Batch collect_results(const DispatchPlan& plan, std::vector<Batch> results);

}  // namespace rlcore::runtime
