// WorkerGroup: the controller's handle on the workers of one resource pool.
// Calling a registered method splits the input per the method's dispatch mode,
// runs it on the chosen ranks and joins their results, asynchronously.
#pragma once

#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/batch.h"
#include "rlcore/core/runtime/dispatch.h"
#include "rlcore/export.h"

namespace rlcore::runtime {

struct WorkerInfo {
  int64_t rank = 0;         // rank in the pool
  int64_t global_rank = 0;  // rank in the run
  int64_t local_rank = 0;
  std::string host;
  int64_t pid = 0;
  std::map<std::string, MeshRank> meshes;  // as the worker reported them
};

// One rank's answer.
struct RankReply {
  int64_t rank = 0;  // rank in the pool
  nlohmann::json value;
  Batch batch;  // empty in CallOutput::replies for dp_compute / mesh_compute / rank_zero (see batch)
};

struct CallOutput {
  // dp_compute / mesh_compute: the results concatenated in dp order, padding
  // removed; rank_zero: rank 0's Batch; otherwise empty.
  Batch batch;
  // The ranks that ran the method, in rank order (mesh_compute: collect ranks in dp order).
  std::vector<RankReply> replies;
};

struct CallOptions {
  // 0: the cluster's call timeout (which may be none).
  std::chrono::milliseconds timeout{0};
};

struct MethodInfo {
  DispatchMode mode = DispatchMode::kOneToAll;
  std::string mesh;
};

namespace detail {
struct ClusterState;
}

class RLCORE_API WorkerGroup {
 public:
  const std::string& pool() const { return pool_; }
  int64_t size() const { return static_cast<int64_t>(workers_.size()); }
  const std::vector<WorkerInfo>& workers() const { return workers_; }
  const std::map<std::string, MethodInfo>& methods() const { return methods_; }

  // Calls `method` ("role.name") with one input Batch (or none) and JSON args,
  // per the method's registered mode. The future throws RemoteCallError (the
  // method threw: names rank, host, pid, method), WorkerLostError (a worker of
  // the run died or went silent), TimeoutError, or ValueError (bad input).
  std::future<CallOutput> call(const std::string& method, const Batch& input = Batch(),
                               const nlohmann::json& args = nlohmann::json::object(), CallOptions options = {});
  // all_to_all methods: `inputs[i]` goes to rank i.
  std::future<CallOutput> call_each(const std::string& method, const std::vector<Batch>& inputs,
                                    const nlohmann::json& args = nlohmann::json::object(), CallOptions options = {});

 private:
  friend class Cluster;
  WorkerGroup(std::string pool, int64_t first_global_rank, std::vector<WorkerInfo> workers,
              std::map<std::string, MethodInfo> methods, std::shared_ptr<detail::ClusterState> state);
  std::future<CallOutput> dispatch(const std::string& method, const std::vector<Batch>& inputs,
                                   const nlohmann::json& args, CallOptions options, bool each);

  std::string pool_;
  int64_t first_global_rank_;
  std::vector<WorkerInfo> workers_;
  std::map<std::string, MethodInfo> methods_;
  std::shared_ptr<detail::ClusterState> state_;
};

// Waits for every future (calls on different groups run concurrently) and
// returns their outputs in order; rethrows the first failure after all have ended.
RLCORE_API std::vector<CallOutput> wait_all(std::vector<std::future<CallOutput>>& futures);

}  // namespace rlcore::runtime
