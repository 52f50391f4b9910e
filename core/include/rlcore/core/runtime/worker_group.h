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
  // all_to_all on a replaceable pool: the ranks lost while the call ran, which
  // have no reply (the others' replies are in `replies`).
  std::vector<int64_t> lost_ranks;
};

struct CallOptions {
  // 0: the cluster's call timeout (which may be none).
  std::chrono::milliseconds timeout{0};
  // one_to_all and all_to_all: only these ranks run the method (empty: every rank).
  std::vector<int64_t> ranks;
};

struct MethodInfo {
  DispatchMode mode = DispatchMode::kOneToAll;
  std::string mesh;
};

namespace detail {
struct ClusterState;
struct PendingCall;
}  // namespace detail

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

  // A replaceable pool (PoolSpec::replaceable): the ranks whose worker was lost
  // and whose replacement is not yet set up, and how many times each rank's
  // worker has been lost (0: the worker the run started with).
  std::vector<int64_t> lost_ranks() const;
  int64_t incarnation(int64_t rank) const;
  // Waits until no rank is lost. Throws WorkerLostError when the run fails
  // meanwhile (a replacement that did not join within the rejoin timeout).
  void await_replacements() const;

 private:
  friend class Cluster;
  WorkerGroup(std::string pool, int64_t first_global_rank, std::vector<WorkerInfo> workers,
              std::map<std::string, MethodInfo> methods, std::shared_ptr<detail::ClusterState> state);
  std::future<CallOutput> dispatch(const std::string& method, const std::vector<Batch>& inputs,
                                   const nlohmann::json& args, CallOptions options, bool each);
  bool replaceable(int64_t global_rank) const;
  // Settles `call` when no rank is left to answer (every target of an all_to_all call lost).
  void complete_if_answered(const std::shared_ptr<detail::PendingCall>& call);

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
