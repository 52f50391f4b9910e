// WorkerGroup calls: planning, sending (one encoding shared by all ranks that
// get the same Batch), reply matching and assembly.
#include "rlcore/core/runtime/worker_group.h"

#include <optional>
#include <set>

#include <spdlog/spdlog.h>

#include "rlcore/error.h"
#include "rlcore/string_join.h"
#include "runtime/cluster_state.h"

namespace rlcore::runtime {

namespace detail {

namespace {

std::string ranks_text(const std::set<int64_t>& ranks, const std::vector<WorkerAddress>& workers) {
  return join(ranks, ", ", [&workers](int64_t rank) { return workers[rank].describe_in_pool(rank); });
}

}  // namespace

void ClusterState::fail(const WorkerAddress& worker, const std::string& message) {
  std::vector<std::shared_ptr<PendingCall>> failed;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!failure) {
      failure = message;
      failed_worker = worker;
    }
    for (auto& [id, call] : calls) failed.push_back(call);
    calls.clear();
    changed.notify_all();
  }
  for (auto& call : failed) {
    // The lost worker first; what the others then reported follows as its consequence.
    const std::string collateral = call->held_error ? "; then, as a consequence: " + *call->held_error : "";
    call->promise.set_exception(std::make_exception_ptr(WorkerLostError(
        worker, "call '" + call->method + "' on pool '" + call->pool + "' failed: " + message + collateral)));
  }
}

bool ClusterState::lose(const WorkerAddress& worker, const std::string& message) {
  std::vector<std::shared_ptr<PendingCall>> failed, completed;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (failure || closing || lost.count(worker.rank)) return false;
    lost[worker.rank] = LostWorker{worker, message, Clock::now() + rejoin_timeout};
    ++incarnation[worker.rank];
    ready.erase(worker.rank);
    const int64_t pool_rank = worker.rank - first_rank_of[worker.rank];
    for (auto it = calls.begin(); it != calls.end();) {
      PendingCall& call = *it->second;
      const bool waits_on_it = pool_rank < static_cast<int64_t>(call.workers.size()) &&
                               call.workers[pool_rank].rank == worker.rank && call.waiting.count(pool_rank) > 0;
      if (!waits_on_it) {
        ++it;
        continue;
      }
      if (call.mode == DispatchMode::kAllToAll && !call.held_error) {
        call.waiting.erase(pool_rank);
        call.lost.insert(pool_rank);
        if (!call.waiting.empty()) {
          ++it;
          continue;
        }
        completed.push_back(it->second);
      } else {
        failed.push_back(it->second);
      }
      it = calls.erase(it);
    }
    changed.notify_all();
  }
  for (auto& call : failed) {
    call->promise.set_exception(std::make_exception_ptr(
        WorkerLostError(worker, "call '" + call->method + "' on pool '" + call->pool + "' failed: " + message)));
  }
  for (auto& call : completed) {
    try {
      call->promise.set_value(assemble(*call));
    } catch (const std::exception&) {
      call->promise.set_exception(std::current_exception());
    }
  }
  return true;
}

std::vector<int64_t> ClusterState::report_held(PendingCall& call) {
  std::string message = *call.held_error;
  std::vector<int64_t> stuck;
  if (call.held_in_collective && inquiry) {
    // On the control plane's I/O thread: an answer that cannot be read must not take the thread down.
    InquiryFinding finding;
    try {
      finding = describe(*inquiry, peers);
    } catch (const std::exception& e) {
      finding.text = std::string("the workers' answers about the collective could not be read: ") + e.what();
    }
    message += "; " + finding.text;
    stuck = std::move(finding.stuck);
    if (!stuck.empty() && !failure) {
      // The stuck workers are ended next: their deaths are this failure's consequence.
      failure = "method '" + call.method + "' on pool '" + call.pool + "': " + message;
      failed_worker = call.held_worker;
    }
  }
  call.report = std::make_exception_ptr(RemoteCallError(call.held_worker, call.method, message));
  return stuck;
}

void ClusterState::end_workers(const std::vector<int64_t>& global_ranks) {
  for (int64_t rank : global_ranks) {
    spdlog::warn("control plane: ending worker rank {}, stuck short of a failed collective", rank);
    if (end_worker) end_worker(rank);
  }
}

void ClusterState::send_probes(const std::set<int64_t>& global_ranks) {
  nlohmann::json probe = control_header("probe");
  probe["id"] = 0;
  for (int64_t rank : global_ranks) {
    try {
      server->send_encoded(rank, probe, nullptr);
    } catch (const std::exception&) {
      // Gone already: it stays unanswered, and the report says so.
    }
  }
}

void ClusterState::on_reply(const PeerInfo& peer, Envelope reply) {
  const uint64_t id = reply.header["id"].get<uint64_t>();
  std::shared_ptr<PendingCall> call;
  std::set<int64_t> to_probe;
  std::vector<int64_t> to_end;
  bool done = false;
  bool reported = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = calls.find(id);
    if (it == calls.end()) {
      spdlog::debug("control plane: reply to call {} from rank {} arrived after the call ended", id, peer.rank);
      return;
    }
    call = it->second;
    const int64_t rank = peer.rank - first_rank_of[peer.rank];
    if (!call->waiting.erase(rank)) {
      spdlog::warn("control plane: dropped an unexpected reply to call {} from worker rank {}", id, peer.rank);
      return;
    }
    if (!reply.header["ok"].get<bool>() && !call->held_error) {
      const WorkerAddress& worker = call->workers[rank];
      call->held_error = "method '" + call->method + "' failed on pool '" + call->pool + "' " +
                         worker.describe_in_pool(rank) + ": " + reply.header["error"].get<std::string>();
      call->held_worker = worker;
      call->report_at = Clock::now() + kDeathGrace;
      const auto collective = reply.header.find("collective");
      if (collective != reply.header.end() && collective->is_object()) {
        call->held_in_collective = true;
        if (!inquiry) {
          inquiry.emplace();
          inquiry->failed = *collective;
          inquiry->reported_by = peer.rank;
          inquiry->reporter_first_rank = first_rank_of[peer.rank];
          for (const auto& [global, info] : peers) inquiry->asked.insert(global);
          to_probe = inquiry->asked;
        }
      }
    }
    if (call->held_error) {
      // Everyone answered: nobody of this call died, so the first error stands,
      // once the workers said how far they got in its collective.
      const bool inquiring = call->held_in_collective && inquiry && !inquiry->complete();
      if (call->waiting.empty() && !inquiring) {
        calls.erase(it);
        to_end = report_held(*call);
        reported = true;
      }
    } else {
      call->replies[rank] = RankReply{rank, reply.header.value("value", nlohmann::json()), std::move(reply.batch)};
      done = call->waiting.empty();
      if (done) calls.erase(it);
    }
  }
  send_probes(to_probe);
  // The stuck workers are ended before the caller learns of the failure: the
  // caller then shuts the run down, and takes the launcher with it.
  end_workers(to_end);
  if (reported) call->promise.set_exception(call->report);
  if (!done) return;
  try {
    call->promise.set_value(assemble(*call));
  } catch (const std::exception&) {
    call->promise.set_exception(std::current_exception());
  }
}

void ClusterState::on_probe_reply(const PeerInfo& peer, const nlohmann::json& header) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!inquiry || !inquiry->asked.count(peer.rank)) return;
  inquiry->answers[peer.rank] = header.value("state", nlohmann::json::object());
  if (!inquiry->complete()) return;
  // Every worker answered, so none is dead: no death to wait for before reporting.
  for (auto& [id, call] : calls) {
    if (call->held_in_collective) call->report_at = Clock::now();
  }
}

void ClusterState::expire_calls() {
  std::vector<std::shared_ptr<PendingCall>> expired, reported;
  std::vector<int64_t> to_end;
  std::optional<LostWorker> not_replaced;
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto now = Clock::now();
    for (const auto& [rank, gone] : lost) {
      if (now >= gone.rejoin_by && !failure) not_replaced = gone;
    }
    for (auto it = calls.begin(); it != calls.end();) {
      if (it->second->held_error && now >= it->second->report_at) {
        const auto stuck = report_held(*it->second);
        to_end.insert(to_end.end(), stuck.begin(), stuck.end());
        reported.push_back(it->second);
        it = calls.erase(it);
      } else if (it->second->deadline && now >= *it->second->deadline) {
        expired.push_back(it->second);
        it = calls.erase(it);
      } else {
        ++it;
      }
    }
  }
  end_workers(to_end);
  for (auto& call : reported) call->promise.set_exception(call->report);
  if (not_replaced) {
    fail(not_replaced->worker,
         not_replaced->reason + "; no replacement was set up within the rejoin timeout (" +
             std::to_string(std::chrono::duration_cast<std::chrono::seconds>(rejoin_timeout).count()) +
             " s, async_training.rejoin_timeout_s)");
  }
  for (auto& call : expired) {
    call->promise.set_exception(
        std::make_exception_ptr(TimeoutError("call '" + call->method + "' on pool '" + call->pool +
                                             "' timed out waiting for " + ranks_text(call->waiting, call->workers))));
  }
}

std::vector<std::shared_ptr<PendingCall>> ClusterState::take_calls() {
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<std::shared_ptr<PendingCall>> taken;
  for (auto& [id, call] : calls) taken.push_back(call);
  calls.clear();
  return taken;
}

CallOutput assemble(PendingCall& call) {
  CallOutput output;
  std::vector<Batch> kept;
  output.lost_ranks.assign(call.lost.begin(), call.lost.end());
  for (int64_t rank : call.plan.collect) {
    if (call.lost.count(rank)) continue;
    RankReply& reply = call.replies.at(rank);
    if (call.mode == DispatchMode::kOneToAll || call.mode == DispatchMode::kAllToAll) {
      output.replies.push_back(std::move(reply));
      continue;
    }
    kept.push_back(std::move(reply.batch));
    reply.batch = Batch();
    output.replies.push_back(std::move(reply));
  }
  if (call.mode == DispatchMode::kRankZero) {
    output.batch = std::move(kept.front());
  } else if (call.mode == DispatchMode::kDpCompute || call.mode == DispatchMode::kMeshCompute) {
    try {
      output.batch = collect_results(call.plan, std::move(kept));
    } catch (const Error& e) {
      throw ValueError("results of '" + call.method + "' on pool '" + call.pool + "' cannot be joined: " + e.what());
    }
  }
  return output;
}

}  // namespace detail

using detail::PendingCall;

namespace {

// Narrows a one_to_all or all_to_all plan to `ranks`.
void only_ranks(DispatchPlan& plan, DispatchMode mode, const std::vector<int64_t>& ranks, const std::string& method) {
  if (mode != DispatchMode::kOneToAll && mode != DispatchMode::kAllToAll) {
    throw ValueError("method '" + method + "' is " + to_string(mode) +
                     ": only one_to_all and all_to_all methods run on chosen ranks");
  }
  const std::set<int64_t> chosen(ranks.begin(), ranks.end());
  DispatchPlan narrowed;
  for (std::size_t i = 0; i < plan.targets.size(); ++i) {
    if (!chosen.count(plan.targets[i])) continue;
    narrowed.targets.push_back(plan.targets[i]);
    narrowed.inputs.push_back(std::move(plan.inputs[i]));
  }
  for (int64_t rank : plan.collect) {
    if (chosen.count(rank)) narrowed.collect.push_back(rank);
  }
  if (narrowed.targets.empty()) throw ValueError("method '" + method + "': none of the chosen ranks is in the pool");
  plan = std::move(narrowed);
}

}  // namespace

WorkerGroup::WorkerGroup(std::string pool, int64_t first_global_rank, std::vector<WorkerInfo> workers,
                         std::map<std::string, MethodInfo> methods, std::shared_ptr<detail::ClusterState> state)
    : pool_(std::move(pool)),
      first_global_rank_(first_global_rank),
      workers_(std::move(workers)),
      methods_(std::move(methods)),
      state_(std::move(state)) {}

std::future<CallOutput> WorkerGroup::call(const std::string& method, const Batch& input, const nlohmann::json& args,
                                          CallOptions options) {
  return dispatch(method, {input}, args, options, false);
}

std::future<CallOutput> WorkerGroup::call_each(const std::string& method, const std::vector<Batch>& inputs,
                                               const nlohmann::json& args, CallOptions options) {
  return dispatch(method, inputs, args, options, true);
}

std::future<CallOutput> WorkerGroup::dispatch(const std::string& method, const std::vector<Batch>& inputs,
                                              const nlohmann::json& args, CallOptions options, bool each) {
  auto call = std::make_shared<PendingCall>();
  std::future<CallOutput> future = call->promise.get_future();
  try {
    auto found = methods_.find(method);
    if (found == methods_.end()) {
      throw ValueError("pool '" + pool_ + "' has no method '" + method +
                       "'; methods: " + join(methods_, ", ", [](const auto& entry) { return entry.first; }));
    }
    const MethodInfo& info = found->second;
    if (each != (info.mode == DispatchMode::kAllToAll)) {
      throw ValueError("method '" + method + "' is " + to_string(info.mode) + ": call it with " +
                       (info.mode == DispatchMode::kAllToAll ? "call_each" : "call"));
    }
    if (!args.is_object()) throw ValueError("the args of '" + method + "' must be a JSON object");
    std::vector<MeshRank> mesh;
    if (info.mode == DispatchMode::kMeshCompute) {
      for (const auto& worker : workers_) mesh.push_back(worker.meshes.at(info.mesh));
    }
    call->pool = pool_;
    call->method = method;
    call->mode = info.mode;
    call->plan = plan_dispatch(info.mode, inputs, size(), mesh);
    if (!options.ranks.empty()) only_ranks(call->plan, info.mode, options.ranks, method);
    call->waiting.insert(call->plan.targets.begin(), call->plan.targets.end());

    nlohmann::json header = control_header("call");
    header["method"] = method;
    header["args"] = args;
    ControlServer* server = nullptr;
    std::set<int64_t> skip;  // lost ranks of an all_to_all call: not sent
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      if (state_->failure) throw WorkerLostError(state_->failed_worker, "the run has failed: " + *state_->failure);
      if (state_->closing) throw Error("the cluster is shutting down");
      for (const auto& worker : workers_) {  // a replaced worker has a new pid
        const auto peer = state_->peers.find(worker.global_rank);
        call->workers.push_back(peer == state_->peers.end()
                                    ? WorkerAddress{worker.global_rank, worker.host, worker.pid}
                                    : WorkerAddress{worker.global_rank, peer->second.host, peer->second.pid});
      }
      for (int64_t rank : call->plan.targets) {
        const auto gone = state_->lost.find(first_global_rank_ + rank);
        if (gone == state_->lost.end()) continue;
        if (info.mode != DispatchMode::kAllToAll) {
          throw WorkerLostError(gone->second.worker, "call '" + method + "' on pool '" + pool_ + "': its rank " +
                                                         std::to_string(rank) + " is lost and not yet replaced");
        }
        call->waiting.erase(rank);  // all_to_all goes on without it (CallOutput::lost_ranks)
        call->lost.insert(rank);
      }
      skip = call->lost;
      call->id = state_->next_id++;
      const auto timeout = options.timeout.count() > 0 ? options.timeout : state_->call_timeout;
      if (timeout.count() > 0) call->deadline = detail::Clock::now() + timeout;
      state_->calls[call->id] = call;
      server = state_->server;
    }
    header["id"] = call->id;
    // Ranks given the same Batch (every rank for one_to_all, tp peers of a dp
    // shard for mesh_compute) share one encoding.
    std::map<int64_t, WireMessage> encoded;
    for (std::size_t i = 0; i < call->plan.targets.size(); ++i) {
      const Batch& input = call->plan.inputs[i];
      const int64_t rank = call->plan.targets[i];
      const int64_t global = first_global_rank_ + rank;
      if (skip.count(rank)) continue;
      const WireMessage* payload = nullptr;
      if (input.has_size()) {
        const int64_t share = info.mode == DispatchMode::kOneToAll      ? 0
                              : info.mode == DispatchMode::kMeshCompute ? mesh[rank].dp_rank
                                                                        : static_cast<int64_t>(i);
        auto it = encoded.find(share);
        if (it == encoded.end()) it = encoded.emplace(share, encode_batch(input)).first;
        payload = &it->second;
      }
      try {
        server->send_encoded(global, header, payload);
      } catch (const WorkerLostError&) {
        // Gone since the check above; a replaceable pool's all_to_all call goes on without it.
        if (info.mode != DispatchMode::kAllToAll || !replaceable(global)) throw;
      }
    }
    call->plan.inputs.clear();
    complete_if_answered(call);
  } catch (...) {
    bool registered = false;
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      registered = state_->calls.erase(call->id) > 0 || call->id == 0;
    }
    // A reply or a failure may already have settled the promise.
    if (registered) call->promise.set_exception(std::current_exception());
  }
  return future;
}

bool WorkerGroup::replaceable(int64_t global_rank) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->replaceable.count(global_rank) > 0;
}

void WorkerGroup::complete_if_answered(const std::shared_ptr<detail::PendingCall>& call) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (!call->waiting.empty() || state_->calls.erase(call->id) == 0) return;
  }
  try {
    call->promise.set_value(detail::assemble(*call));
  } catch (const std::exception&) {
    call->promise.set_exception(std::current_exception());
  }
}

std::vector<int64_t> WorkerGroup::lost_ranks() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  std::vector<int64_t> ranks;
  for (const auto& [global, gone] : state_->lost) {
    const int64_t rank = global - first_global_rank_;
    if (rank >= 0 && rank < size()) ranks.push_back(rank);
  }
  return ranks;
}

int64_t WorkerGroup::incarnation(int64_t rank) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const auto found = state_->incarnation.find(first_global_rank_ + rank);
  return found == state_->incarnation.end() ? 0 : found->second;
}

void WorkerGroup::await_replacements() const {
  std::unique_lock<std::mutex> lock(state_->mutex);
  const auto any_lost = [this] {
    for (const auto& [global, gone] : state_->lost) {
      if (global >= first_global_rank_ && global < first_global_rank_ + size()) return true;
    }
    return false;
  };
  state_->changed.wait(lock, [&] { return state_->failure || state_->closing || !any_lost(); });
  if (state_->failure) throw WorkerLostError(state_->failed_worker, "the run has failed: " + *state_->failure);
  if (state_->closing) throw Error("the cluster is shutting down");
}

std::vector<CallOutput> wait_all(std::vector<std::future<CallOutput>>& futures) {
  std::vector<CallOutput> outputs;
  std::exception_ptr first;
  for (auto& future : futures) {
    try {
      outputs.push_back(future.get());
    } catch (...) {
      if (!first) first = std::current_exception();
      outputs.emplace_back();
    }
  }
  if (first) std::rethrow_exception(first);
  return outputs;
}

}  // namespace rlcore::runtime
