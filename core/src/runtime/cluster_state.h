// Private to the core: what a Cluster and its WorkerGroups share: the calls in
// flight, the workers' hellos and ready reports, and the first failure.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <exception>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "rlcore/core/runtime/control_server.h"
#include "rlcore/core/runtime/dispatch.h"
#include "rlcore/core/runtime/errors.h"
#include "rlcore/core/runtime/worker_group.h"
#include "runtime/collective_inquiry.h"

namespace rlcore::runtime::detail {

using Clock = std::chrono::steady_clock;

struct PendingCall {
  uint64_t id = 0;
  std::string pool;
  std::string method;
  DispatchMode mode = DispatchMode::kOneToAll;
  DispatchPlan plan;                   // inputs dropped once sent
  std::vector<WorkerAddress> workers;  // the group's, by pool rank
  std::set<int64_t> waiting;           // pool ranks yet to reply
  std::map<int64_t, RankReply> replies;
  std::promise<CallOutput> promise;
  std::optional<Clock::time_point> deadline;
  // A rank's method failed while other ranks were still running: its error is
  // held until `report_at` (or until they all answer), so that a worker death
  // that caused it (a peer's collective failing first) is reported first.
  std::optional<std::string> held_error;
  WorkerAddress held_worker;
  Clock::time_point report_at;
  // The held error is a collective's failure: reported with who reached it,
  // once every worker answered the probe (or at report_at).
  bool held_in_collective = false;
  std::exception_ptr report;  // the held error as reported, set on the promise once the stuck workers are ended
  std::set<int64_t> lost;     // pool ranks of a replaceable pool lost while it ran (all_to_all)
};

// A lost worker of a replaceable pool, until its replacement is set up.
struct LostWorker {
  WorkerAddress worker;
  std::string reason;
  Clock::time_point rejoin_by;
};

// How long a failed rank's error waits for the death of another rank of the
// same call to be noticed (the launcher reaps every 100 ms tick).
inline constexpr std::chrono::milliseconds kDeathGrace{1500};

struct ClusterState {
  std::mutex mutex;
  std::condition_variable changed;
  ControlServer* server = nullptr;
  std::chrono::milliseconds call_timeout{0};
  std::map<uint64_t, std::shared_ptr<PendingCall>> calls;
  uint64_t next_id = 1;
  bool closing = false;
  std::optional<std::string> failure;
  WorkerAddress failed_worker;
  std::map<int64_t, PeerInfo> peers;         // by global rank: every hello admitted
  std::map<int64_t, nlohmann::json> ready;   // by global rank
  std::map<int64_t, int64_t> first_rank_of;  // global rank -> first global rank of its pool
  std::optional<CollectiveInquiry> inquiry;  // the run's first failed collective
  // Ends a worker stuck short of a failed collective (the local launcher kills it).
  std::function<void(int64_t global_rank)> end_worker;
  std::set<int64_t> replaceable;  // global ranks of replaceable pools
  std::chrono::milliseconds rejoin_timeout{0};
  std::map<int64_t, LostWorker> lost;      // by global rank
  std::map<int64_t, int64_t> incarnation;  // global rank -> times its worker was lost

  // Records the run's first failure and fails every call in flight with it.
  void fail(const WorkerAddress& worker, const std::string& message);
  // A worker of a replaceable pool is lost: only the calls waiting on it fail,
  // and all_to_all calls end with the other ranks' replies (CallOutput::lost_ranks).
  // False when the run has failed or the worker was already counted lost.
  bool lose(const WorkerAddress& worker, const std::string& message);
  void on_reply(const PeerInfo& peer, Envelope reply);
  void on_probe_reply(const PeerInfo& peer, const nlohmann::json& header);
  // Fails calls whose deadline has passed, and the run when a lost worker's
  // replacement is late.
  void expire_calls();
  // Takes every call in flight (for shutdown).
  std::vector<std::shared_ptr<PendingCall>> take_calls();

 private:
  // Builds `call`'s report from its held error (and who reached its failed
  // collective); returns the workers to end first. Called with `mutex` held.
  std::vector<int64_t> report_held(PendingCall& call);
  void end_workers(const std::vector<int64_t>& global_ranks);
  void send_probes(const std::set<int64_t>& global_ranks);
};

// Assembles a call's output from its replies per its dispatch mode.
CallOutput assemble(PendingCall& call);

}  // namespace rlcore::runtime::detail
