// Private to the core: the contract between the trainer (controller) and its
// worker roles, in one place for both sides: the methods (registered on the
// worker by name, called by the controller as "<role>.<name>"), the keys of
// their arguments, and the replies, each parsed next to the code that writes it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/batch.h"
#include "rlcore/generation_request.h"
#include "rlcore/sharding_manager.h"
#include "trainer/weight_transfer.h"

namespace rlcore::trainer {

// Role names of the trainer's methods: "actor.<method>", "critic.<method>".
inline constexpr const char* kActorRole = "actor";
inline constexpr const char* kCriticRole = "critic";
inline constexpr const char* kRewardModelRole = "reward_model";
inline constexpr const char* kRolloutRole = "rollout";  // a standalone rollout pool (docs/async.md)

// The role types the workers construct (RoleSpec::type, RoleRegistry::add):
// the actor's is verl's config section, actor_rollout_ref.
namespace role_types {
inline constexpr const char* kActor = "actor_rollout_ref";
inline constexpr const char* kCritic = "critic";
inline constexpr const char* kRewardModel = "reward_model";
inline constexpr const char* kRollout = "rollout";
}  // namespace role_types

// One method of a role: the worker registers `name`, the controller calls qualified().
struct Method {
  const char* role;
  const char* name;
  std::string qualified() const { return std::string(role) + "." + name; }
};

namespace actor_methods {
inline constexpr Method kGenerate{kActorRole, "generate"};
inline constexpr Method kComputeLogProb{kActorRole, "compute_log_prob"};
inline constexpr Method kComputeRefLogProb{kActorRole, "compute_ref_log_prob"};
inline constexpr Method kUpdateActor{kActorRole, "update_actor"};
inline constexpr Method kSftStep{kActorRole, "sft_step"};
inline constexpr Method kSyncWeights{kActorRole, "sync_weights"};
inline constexpr Method kSaveCheckpoint{kActorRole, "save_checkpoint"};
inline constexpr Method kLoadCheckpoint{kActorRole, "load_checkpoint"};
inline constexpr Method kExportHf{kActorRole, "export_hf"};
inline constexpr Method kMemory{kActorRole, "memory"};
// With a standalone rollout pool: rank 0 joins the bridge; every rank gathers, rank 0 sends.
inline constexpr Method kJoinBridge{kActorRole, "join_bridge"};
inline constexpr Method kSendWeights{kActorRole, "send_weights"};
}  // namespace actor_methods

// A standalone rollout pool's methods: generate as the actor's (same
// arguments and reply), the bridge, and the weights from the actor's rank 0.
namespace rollout_methods {
inline constexpr Method kGenerate{kRolloutRole, "generate"};
inline constexpr Method kJoinBridge{kRolloutRole, "join_bridge"};
inline constexpr Method kReceiveWeights{kRolloutRole, "receive_weights"};
// async_training.mode fully_async: queues the rank's new requests (rows of a
// prompt batch with kRequestId and kRequestSeed), runs up to kDecodeSteps
// decode steps and returns the requests that finished (StreamReply).
inline constexpr Method kStream{kRolloutRole, "stream"};
}  // namespace rollout_methods

// stream's input columns: the controller's id of each new request and its sampling seed.
inline constexpr const char* kRequestId = "request_id";
inline constexpr const char* kRequestSeed = "request_seed";

namespace critic_methods {
inline constexpr Method kComputeValues{kCriticRole, "compute_values"};
inline constexpr Method kUpdateCritic{kCriticRole, "update_critic"};
inline constexpr Method kSaveCheckpoint{kCriticRole, "save_checkpoint"};
inline constexpr Method kLoadCheckpoint{kCriticRole, "load_checkpoint"};
}  // namespace critic_methods

namespace reward_model_methods {
// Input: one sequence per row in the engine layout, the sequence as the
// "prompt" and one padding token as the "response", so the value head's output
// for that response is the score at the sequence's last token. Output: kRmScores [B].
inline constexpr Method kComputeRmScore{kRewardModelRole, "compute_rm_score"};
}  // namespace reward_model_methods

// The reward model's output column (verl's rm_scores, one score per row).
inline constexpr const char* kRmScores = "rm_scores";

// Argument keys. Which method reads which: generate reads the sampling keys
// and the generation limits; compute_log_prob, compute_ref_log_prob and
// update_actor read kTemperature; update_actor and update_critic read
// kMiniBatchRows (update_critic also kEpochs); the checkpoint and export methods
// read kDir; sync_weights and receive_weights read kVersion.
namespace args {
inline constexpr const char* kDir = "dir";
inline constexpr const char* kVersion = "version";
inline constexpr const char* kMiniBatchRows = "mini_batch_rows";
inline constexpr const char* kEpochs = "epochs";
inline constexpr const char* kTemperature = "temperature";
inline constexpr const char* kEntropy = "entropy";  // compute_log_prob: also return entropys
// generate: sampling
inline constexpr const char* kGreedy = "greedy";
inline constexpr const char* kTopK = "top_k";
inline constexpr const char* kTopP = "top_p";
inline constexpr const char* kSeed = "seed";
inline constexpr const char* kValidation = "validation";  // a validation rollout (its own fault point)
// generate: limits
inline constexpr const char* kMaxTokens = "max_tokens";
inline constexpr const char* kStopTokenIds = "stop_token_ids";
inline constexpr const char* kPadTokenId = "pad_token_id";
// join_bridge: the group's name and size; send_weights: the bucket size
inline constexpr const char* kBridge = "bridge";
inline constexpr const char* kBridgeSize = "bridge_size";
inline constexpr const char* kBucketBytes = "bucket_bytes";
inline constexpr const char* kDecodeSteps = "decode_steps";  // stream
}  // namespace args

// generate's reply value, from each rank.
struct GenerateReply {
  int64_t weight_version = 0;
  std::optional<GenerationStats> stats;  // where the engine reports them (ReportsGenerationStats)

  nlohmann::json to_json() const {
    nlohmann::json value = {{"weight_version", weight_version}};
    if (stats) {
      value["generation_stats"] = {{"decode_steps", stats->decode_steps}, {"running_rows", stats->running_rows},
                                   {"max_running", stats->max_running},   {"max_waiting", stats->max_waiting},
                                   {"prefill_rows", stats->prefill_rows}, {"joins", stats->joins}};
    }
    return value;
  }
  static GenerateReply from_json(const nlohmann::json& value) {
    GenerateReply reply{value.at("weight_version").get<int64_t>(), std::nullopt};
    if (value.contains("generation_stats")) {
      const nlohmann::json& s = value.at("generation_stats");
      reply.stats = GenerationStats{s.at("decode_steps").get<int64_t>(), s.at("running_rows").get<int64_t>(),
                                    s.at("max_running").get<int64_t>(),  s.at("max_waiting").get<int64_t>(),
                                    s.at("prefill_rows").get<int64_t>(), s.at("joins").get<int64_t>()};
    }
    return reply;
  }
};

// load_checkpoint's reply value (actor): the engine's step after loading.
struct LoadCheckpointReply {
  int64_t step = 0;

  nlohmann::json to_json() const { return {{"step", step}}; }
  static LoadCheckpointReply from_json(const nlohmann::json& value) {
    return LoadCheckpointReply{value.at("step").get<int64_t>()};
  }
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
  bool measured_per_swap = true;    // false: some peak could not be reset, so it is the process's (not sent)
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

  nlohmann::json to_json() const {
    return {{"swaps", swaps},
            {"to_rollout_s", to_rollout_s},
            {"to_train_s", to_train_s},
            {"bytes_moved", bytes_moved},
            {"bytes_gathered", bytes_gathered},
            {"planned_peak_bytes", planned_peak_bytes},
            {"measured_peak_bytes", measured_peak_bytes},
            {"phases", phases}};
  }
  static SwapTotals from_json(const nlohmann::json& value) {
    SwapTotals totals;
    totals.swaps = value.at("swaps").get<int64_t>();
    totals.to_rollout_s = value.at("to_rollout_s").get<double>();
    totals.to_train_s = value.at("to_train_s").get<double>();
    totals.bytes_moved = value.at("bytes_moved").get<int64_t>();
    totals.bytes_gathered = value.at("bytes_gathered").get<int64_t>();
    totals.planned_peak_bytes = value.at("planned_peak_bytes").get<int64_t>();
    totals.measured_peak_bytes = value.at("measured_peak_bytes").get<int64_t>();
    totals.phases = value.at("phases").get<std::map<std::string, double>>();
    return totals;
  }
};

// sync_weights' reply value, from each rank: the swaps since the previous
// sync and the worker's memory now.
struct SyncWeightsReply {
  int64_t version = 0;  // the version the next swaps carry
  SwapTotals swaps;
  int64_t allocated_bytes = 0;  // device memory, measured (rlcore/device.h)
  int64_t reserved_bytes = 0;
  int64_t rss_bytes = 0;  // the worker process's resident memory

  nlohmann::json to_json() const {
    nlohmann::json value = swaps.to_json();
    value["version"] = version;
    value["allocated_bytes"] = allocated_bytes;
    value["reserved_bytes"] = reserved_bytes;
    value["rss_bytes"] = rss_bytes;
    return value;
  }
  static SyncWeightsReply from_json(const nlohmann::json& value) {
    SyncWeightsReply reply;
    reply.version = value.at("version").get<int64_t>();
    reply.swaps = SwapTotals::from_json(value);
    reply.allocated_bytes = value.at("allocated_bytes").get<int64_t>();
    reply.reserved_bytes = value.at("reserved_bytes").get<int64_t>();
    reply.rss_bytes = value.at("rss_bytes").get<int64_t>();
    return reply;
  }
};

// send_weights' and receive_weights' reply value, from each rank.
struct WeightTransferReply {
  WeightTransferStats stats;

  nlohmann::json to_json() const {
    return {{"bytes", stats.bytes}, {"buckets", stats.buckets}, {"tensors", stats.tensors}, {"seconds", stats.seconds}};
  }
  static WeightTransferReply from_json(const nlohmann::json& value) {
    return WeightTransferReply{WeightTransferStats{value.at("bytes").get<int64_t>(), value.at("buckets").get<int64_t>(),
                                                   value.at("tensors").get<int64_t>(),
                                                   value.at("seconds").get<double>()}};
  }
};

// stream's reply, from each rank: the requests that finished during the call
// as rows (kRequestId, their tokens, log-probs and weight versions padded to
// the longest, the lengths, and whether each ended with a stop token) and, as
// its value, how many are still queued or running.
struct StreamReply {
  struct Finished {
    int64_t id = 0;
    GeneratedTokens tokens;
    bool stopped = false;
  };
  std::vector<Finished> finished;
  int64_t unfinished = 0;

  Batch to_batch() const;
  nlohmann::json to_json() const { return {{"unfinished", unfinished}}; }
  static StreamReply from_reply(const Batch& rows, const nlohmann::json& value);
};

// memory's reply value (actor): the train engine's bytes (TrainEngine::memory()).
struct MemoryReply {
  int64_t param_bytes = 0;
  int64_t grad_bytes = 0;
  int64_t optimizer_bytes = 0;
  int64_t host_bytes = 0;

  nlohmann::json to_json() const {
    return {{"param_bytes", param_bytes},
            {"grad_bytes", grad_bytes},
            {"optimizer_bytes", optimizer_bytes},
            {"host_bytes", host_bytes}};
  }
  static MemoryReply from_json(const nlohmann::json& value) {
    return MemoryReply{value.at("param_bytes").get<int64_t>(), value.at("grad_bytes").get<int64_t>(),
                       value.at("optimizer_bytes").get<int64_t>(), value.at("host_bytes").get<int64_t>()};
  }
};

}  // namespace rlcore::trainer
