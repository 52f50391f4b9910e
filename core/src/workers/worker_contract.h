// Private to the core: the contract between the trainer (controller, trainer/)
// and its worker roles (workers/), in one place for both sides: each method is
// a name (registered on the worker, called by the controller as
// "<role>.<name>") with an argument and a reply struct, serialized once, so a
// call and its handler that disagree do not compile.
#pragma once

#include <algorithm>
#include <cstdint>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/batch.h"
#include "rlcore/core/runtime/role.h"
#include "rlcore/core/runtime/worker_group.h"
#include "rlcore/generation_request.h"
#include "rlcore/sharding_manager.h"
#include "workers/weight_transfer.h"

namespace rlcore::workers {

// Role names of the trainer's methods: "actor.<method>", "critic.<method>".
inline constexpr const char* kActorRole = "actor";
inline constexpr const char* kCriticRole = "critic";
inline constexpr const char* kRewardModelRole = "reward_model";
inline constexpr const char* kRolloutRole = "rollout";  // a standalone rollout pool (docs/async.md)

// The role types the workers construct (runtime::RoleSpec::type, runtime::RoleRegistry::add):
// the actor's is verl's config section, actor_rollout_ref.
namespace role_types {
inline constexpr const char* kActor = "actor_rollout_ref";
inline constexpr const char* kCritic = "critic";
inline constexpr const char* kRewardModel = "reward_model";
inline constexpr const char* kRollout = "rollout";
}  // namespace role_types

// stream's input columns: the controller's id of each new request and its sampling seed.
inline constexpr const char* kRequestId = "request_id";
inline constexpr const char* kRequestSeed = "request_seed";

// The reward model's output column (verl's rm_scores, one score per row).
inline constexpr const char* kRmScores = "rm_scores";

// Arguments and replies. Each method below is a typed pair of argument and
// reply-value structs with one serialization each (nlohmann's macros: every key
// required), so the compiler checks the controller's call and the worker's
// handler against the same types.

// A method without arguments or without a reply value.
struct NoArgs {};
struct NoReply {};
inline void to_json(nlohmann::json& j, const NoArgs&) { j = nlohmann::json::object(); }
inline void from_json(const nlohmann::json&, NoArgs&) {}
inline void to_json(nlohmann::json& j, const NoReply&) { j = nullptr; }
inline void from_json(const nlohmann::json&, NoReply&) {}

// The sampling of a generate or stream call.
struct Sampling {
  bool greedy = false;  // temperature 0 whatever `temperature` says
  double temperature = 1.0;
  int64_t top_k = -1;
  double top_p = 1.0;
  // The call's seed: each rollout dp rank samples with seed * 1009 + its dp rank;
  // an agent loop's turn t adds t * its stride. stream ignores it (a seed per request).
  int64_t seed = 0;
  bool validation = false;  // a validation rollout (its own fault point)
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(Sampling, greedy, temperature, top_k, top_p, seed, validation)
};

// How long responses may grow, where they stop and how the rows are padded.
struct TokenLimits {
  int64_t max_tokens = 0;
  std::vector<int32_t> stop_token_ids;
  int64_t pad_token_id = 0;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(TokenLimits, max_tokens, stop_token_ids, pad_token_id)
};

struct GenerateArgs {
  Sampling sampling;
  TokenLimits limits;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(GenerateArgs, sampling, limits)
};

// stream: queues the rank's new requests (rows of a prompt batch with kRequestId
// and kRequestSeed), runs up to decode_steps decode steps and returns the
// requests that finished as rows (StreamReply), with StreamStatus as its value.
struct StreamArgs {
  Sampling sampling;
  TokenLimits limits;
  int64_t decode_steps = 1;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(StreamArgs, sampling, limits, decode_steps)
};
struct StreamStatus {
  int64_t unfinished = 0;  // requests still queued or running on the rank
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(StreamStatus, unfinished)
};

struct LogProbArgs {  // compute_log_prob, compute_ref_log_prob
  double temperature = 1.0;
  bool entropy = false;  // compute_log_prob: also return entropys
  // compute_log_prob (routing replay, docs/moe.md): replay the batch's
  // routed_experts; return the routing the pass used as routed_experts.
  bool replay_routing = false;
  bool record_routing = false;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(LogProbArgs, temperature, entropy, replay_routing, record_routing)
};

// Both updates get their passes from the controller's batch plan, which
// resolves critic.ppo_epochs' "0: the actor's" (trainer/batch_plan.h).
struct UpdateActorArgs {
  int64_t mini_batch_rows = 0;
  int64_t epochs = 1;
  double temperature = 1.0;
  bool replay_routing = false;  // replay the batch's routed_experts (routing replay)
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(UpdateActorArgs, mini_batch_rows, epochs, temperature, replay_routing)
};

struct UpdateCriticArgs {
  int64_t mini_batch_rows = 0;
  int64_t epochs = 1;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(UpdateCriticArgs, mini_batch_rows, epochs)
};

// update_actor's, update_critic's and sft_step's reply, from the first rank:
// the optimizer steps' metrics averaged (verl's reduce_metrics), the engine's
// learning rate and gradient norm apart from the loss's metrics, so the
// controller names them for the role (actor/lr, critic/grad_norm).
struct UpdateReply {
  double lr = 0;
  double grad_norm = 0;
  bool has_grad_norm = false;             // false: the engine reports none
  std::map<std::string, double> metrics;  // the loss's ("actor/pg_loss" ...)
  // The engine's own beyond lr and grad_norm, unprefixed ("moe_aux_loss").
  std::map<std::string, double> engine_metrics;

  // Adds the loss's metrics and the engine's under `role` ("actor": actor/lr,
  // actor/grad_norm, actor/moe_aux_loss ...).
  void add_to(std::map<std::string, double>& into, const std::string& role) const {
    into.insert(metrics.begin(), metrics.end());
    into[role + "/lr"] = lr;
    if (has_grad_norm) into[role + "/grad_norm"] = grad_norm;
    for (const auto& [name, value] : engine_metrics) into[role + "/" + name] = value;
  }
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(UpdateReply, lr, grad_norm, has_grad_norm, metrics, engine_metrics)
};

struct DirArgs {  // the checkpoint and export methods
  std::string dir;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(DirArgs, dir)
};

struct VersionArgs {  // sync_weights, receive_weights: the version the weights carry from now on
  int64_t version = 0;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(VersionArgs, version)
};

struct JoinBridgeArgs {  // the group the actor's rank 0 and the rollout pool share
  std::string bridge;
  int64_t bridge_size = 0;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(JoinBridgeArgs, bridge, bridge_size)
};

struct SendWeightsArgs {
  int64_t bucket_bytes = 0;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(SendWeightsArgs, bucket_bytes)
};

// generate's reply value, from each rank.
struct GenerateReply {
  int64_t weight_version = 0;
  std::optional<GenerationStats> stats;  // where the engine reports them (ReportsGenerationStats)
};
inline void to_json(nlohmann::json& j, const GenerateReply& reply) {
  j = {{"weight_version", reply.weight_version}};
  if (reply.stats) {
    const GenerationStats& s = *reply.stats;
    j["generation_stats"] = {{"decode_steps", s.decode_steps}, {"running_rows", s.running_rows},
                             {"max_running", s.max_running},   {"max_waiting", s.max_waiting},
                             {"prefill_rows", s.prefill_rows}, {"joins", s.joins}};
  }
}
inline void from_json(const nlohmann::json& j, GenerateReply& reply) {
  reply.weight_version = j.at("weight_version").get<int64_t>();
  reply.stats.reset();
  if (!j.contains("generation_stats")) return;
  const nlohmann::json& s = j.at("generation_stats");
  reply.stats = GenerationStats{s.at("decode_steps").get<int64_t>(), s.at("running_rows").get<int64_t>(),
                                s.at("max_running").get<int64_t>(),  s.at("max_waiting").get<int64_t>(),
                                s.at("prefill_rows").get<int64_t>(), s.at("joins").get<int64_t>()};
}

// load_checkpoint's reply value (actor): the engine's step after loading.
struct LoadCheckpointReply {
  int64_t step = 0;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(LoadCheckpointReply, step)
};

// The swaps (train <-> rollout around each generate) since the last sync_weights, summed.
struct SwapTotals {
  int64_t swaps = 0;
  double to_rollout_s = 0;
  double to_train_s = 0;
  int64_t bytes_moved = 0;
  int64_t bytes_gathered = 0;
  int64_t planned_peak_bytes = 0;   // the largest
  int64_t measured_peak_bytes = 0;  // the largest
  bool measured_per_swap = true;    // false: some peak could not be reset, so it is the process's
  std::map<std::string, double> phases;

  void add_peaks(const SwapStats& s) {
    planned_peak_bytes = std::max(planned_peak_bytes, s.planned_peak_bytes);
    measured_peak_bytes = std::max(measured_peak_bytes, s.measured_peak_bytes);
    measured_per_swap = measured_per_swap && s.measured_per_swap;
  }
  void add_to_rollout(const SwapStats& s) {
    ++swaps;
    to_rollout_s += s.seconds;
    bytes_moved += s.bytes_moved;
    bytes_gathered += s.bytes_gathered;
    add_peaks(s);
    phases["gather"] += s.gather_s;
    phases["convert"] += s.convert_s;
    phases["copy"] += s.copy_s;
    phases["offload"] += s.offload_s;
  }
  void add_to_train(const SwapStats& s) {
    to_train_s += s.seconds;
    add_peaks(s);
    phases["reload"] += s.reload_s;
  }
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(SwapTotals, swaps, to_rollout_s, to_train_s, bytes_moved, bytes_gathered,
                                 planned_peak_bytes, measured_peak_bytes, measured_per_swap, phases)
};

// sync_weights' reply value, from each rank: the swaps since the previous
// sync and the worker's memory now.
struct SyncWeightsReply {
  int64_t version = 0;  // the version the next swaps carry
  SwapTotals swaps;
  int64_t allocated_bytes = 0;  // device memory, measured (rlcore/device.h)
  int64_t reserved_bytes = 0;
  int64_t rss_bytes = 0;  // the worker process's resident memory
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(SyncWeightsReply, version, swaps, allocated_bytes, reserved_bytes, rss_bytes)
};

// send_weights' and receive_weights' reply value, from each rank.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(WeightTransferStats, bytes, buckets, tensors, seconds)

// memory's reply value (actor): the train engine's bytes (TrainEngine::memory()).
struct MemoryReply {
  int64_t param_bytes = 0;
  int64_t grad_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t host_bytes = 0;
  NLOHMANN_DEFINE_TYPE_INTRUSIVE(MemoryReply, param_bytes, grad_bytes, optimizer_bytes, host_bytes)
};

// stream's rows: the requests that finished during the call (kRequestId, their
// tokens, log-probs and weight versions padded to the longest, the lengths, and
// whether each ended with a stop token), and how many remain (StreamStatus).
struct StreamReply {
  struct Finished {
    int64_t id = 0;
    GeneratedTokens tokens;
    bool stopped = false;
  };
  std::vector<Finished> finished;
  int64_t unfinished = 0;

  Batch to_batch() const;
  static StreamReply from_reply(const Batch& rows, const StreamStatus& status);
};

// One method of a role: the worker registers `name`, the controller calls
// qualified(); Args is what the call sends, Reply what each rank's value is.
template <typename ArgsT, typename ReplyT>
struct Method {
  using Args = ArgsT;
  using Reply = ReplyT;
  const char* role;
  const char* name;
  std::string qualified() const { return std::string(role) + "." + name; }
};

using GenerateMethod = Method<GenerateArgs, GenerateReply>;
using DirMethod = Method<DirArgs, NoReply>;

namespace actor_methods {
inline constexpr GenerateMethod kGenerate{kActorRole, "generate"};
inline constexpr Method<LogProbArgs, NoReply> kComputeLogProb{kActorRole, "compute_log_prob"};
inline constexpr Method<LogProbArgs, NoReply> kComputeRefLogProb{kActorRole, "compute_ref_log_prob"};
inline constexpr Method<UpdateActorArgs, UpdateReply> kUpdateActor{kActorRole, "update_actor"};
inline constexpr Method<NoArgs, UpdateReply> kSftStep{kActorRole, "sft_step"};
inline constexpr Method<VersionArgs, SyncWeightsReply> kSyncWeights{kActorRole, "sync_weights"};
inline constexpr DirMethod kSaveCheckpoint{kActorRole, "save_checkpoint"};
inline constexpr Method<DirArgs, LoadCheckpointReply> kLoadCheckpoint{kActorRole, "load_checkpoint"};
inline constexpr DirMethod kExportHf{kActorRole, "export_hf"};
inline constexpr Method<NoArgs, MemoryReply> kMemory{kActorRole, "memory"};
// With a standalone rollout pool: rank 0 joins the bridge; every rank gathers, rank 0 sends.
inline constexpr Method<JoinBridgeArgs, NoReply> kJoinBridge{kActorRole, "join_bridge"};
inline constexpr Method<SendWeightsArgs, WeightTransferStats> kSendWeights{kActorRole, "send_weights"};
}  // namespace actor_methods

// A standalone rollout pool's methods: generate as the actor's, the bridge,
// the weights from the actor's rank 0, and fully_async's request stream.
namespace rollout_methods {
inline constexpr GenerateMethod kGenerate{kRolloutRole, "generate"};
inline constexpr Method<JoinBridgeArgs, NoReply> kJoinBridge{kRolloutRole, "join_bridge"};
inline constexpr Method<VersionArgs, WeightTransferStats> kReceiveWeights{kRolloutRole, "receive_weights"};
inline constexpr Method<StreamArgs, StreamStatus> kStream{kRolloutRole, "stream"};
}  // namespace rollout_methods

namespace critic_methods {
inline constexpr Method<NoArgs, NoReply> kComputeValues{kCriticRole, "compute_values"};
inline constexpr Method<UpdateCriticArgs, UpdateReply> kUpdateCritic{kCriticRole, "update_critic"};
inline constexpr DirMethod kSaveCheckpoint{kCriticRole, "save_checkpoint"};
inline constexpr DirMethod kLoadCheckpoint{kCriticRole, "load_checkpoint"};
}  // namespace critic_methods

namespace reward_model_methods {
// Input: one sequence per row in the engine layout, the sequence as the
// "prompt" and one padding token as the "response", so the value head's output
// for that response is the score at the sequence's last token. Output: kRmScores [B].
inline constexpr Method<NoArgs, NoReply> kComputeRmScore{kRewardModelRole, "compute_rm_score"};
}  // namespace reward_model_methods

// The controller's side: calls `method` on `group` with typed arguments ...
template <typename A, typename R>
std::future<runtime::CallOutput> call(runtime::WorkerGroup& group, const Method<A, R>& method,
                                      const Batch& input = Batch(), const A& args = A(),
                                      runtime::CallOptions options = {}) {
  return group.call(method.qualified(), input, nlohmann::json(args), options);
}
// ... (all_to_all: `inputs[i]` goes to rank i) ...
template <typename A, typename R>
std::future<runtime::CallOutput> call_each(runtime::WorkerGroup& group, const Method<A, R>& method,
                                           const std::vector<Batch>& inputs, const A& args,
                                           runtime::CallOptions options = {}) {
  return group.call_each(method.qualified(), inputs, nlohmann::json(args), options);
}
// ... and reads a rank's reply value.
template <typename A, typename R>
R reply_of(const Method<A, R>&, const runtime::RankReply& reply) {
  return reply.value.get<R>();
}

// The worker's side: what a handler returns, and the role method that parses
// the arguments, runs `handler(batch, args)` and serializes its reply.
template <typename R>
struct Replied {
  Batch batch;
  R value;
};
template <typename A, typename R, typename Handler>
rlcore::runtime::Method handle(const Method<A, R>&, Handler handler) {
  return [handler = std::move(handler)](const Batch& batch, const nlohmann::json& args) {
    Replied<R> out = handler(batch, args.get<A>());
    return runtime::MethodResult{std::move(out.batch), nlohmann::json(out.value)};
  };
}

}  // namespace rlcore::workers
