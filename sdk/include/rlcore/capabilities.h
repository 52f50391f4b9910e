// Optional capabilities of a component, asked for instead of added to a
// released interface as new pure virtuals (TensorRT's getCapabilityInterface).
// A component inherits each capability it truly has; the core asks
//
//   if (auto* adopter = capability<AdoptsWeights>(*engine)) adopter->wake_up_unallocated();
//
// and `rlcore plugins` lists them, because PluginRegistrar::add records the
// capabilities of the type a factory makes. A new capability is a new class
// here and an SDK minor bump (sdk/CHANGELOG.md, docs/plugin-abi.md).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "rlcore/export.h"
#include "rlcore/generation_request.h"
#include "rlcore/plugin_abi.h"

namespace at {
class Tensor;
}

namespace rlcore {

class Batch;
struct ForwardOptions;
struct ModelOutput;

// Inference engine: wake up without allocating parameter storage and take the
// caller's tensors as its parameters, so the sharding manager's bucket is the
// only copy of the weights.
class RLCORE_API AdoptsWeights {
 public:
  static constexpr const char* kName = "adopts_weights";
  virtual ~AdoptsWeights();
  // Like wake_up(), but allocates nothing: every parameter must then arrive
  // through load_weights() before generate().
  virtual void wake_up_unallocated() = 0;
  // Bytes of parameter storage the engine references now (each storage once).
  virtual int64_t weight_bytes_held() const = 0;
};

// The markers below carry no methods: the interface the engine already has
// (its options, its CommContext groups) does the work; the marker says that
// the work is real rather than a no-op.

// Splits the batch over the "dp" group's ranks, each holding a shard or a replica.
class RLCORE_API DataParallel {
 public:
  static constexpr const char* kName = "data_parallel";
  virtual ~DataParallel();
};

// Splits each layer's weights over a tensor-parallel group (Megatron layout).
class RLCORE_API TensorParallel {
 public:
  static constexpr const char* kName = "tensor_parallel";
  virtual ~TensorParallel();
};

// Splits the layers into stages over a "pp" group.
class RLCORE_API PipelineParallel {
 public:
  static constexpr const char* kName = "pipeline_parallel";
  virtual ~PipelineParallel();
};

// Train engine: offload() / reload() move parameters, gradients and optimizer
// state to host memory and back.
class RLCORE_API OffloadsState {
 public:
  static constexpr const char* kName = "offload";
  virtual ~OffloadsState();
};

// Inference engine: sleep() releases its device memory and wake_up() takes it back.
class RLCORE_API Sleeps {
 public:
  static constexpr const char* kName = "sleep";
  virtual ~Sleeps();
};

// Inference engine: generation runs in another process (a server), which
// receives weights from disk snapshots rather than tensors in memory.
class RLCORE_API RemoteGeneration {
 public:
  static constexpr const char* kName = "remote";
  virtual ~RemoteGeneration();
};

// Sharding manager: a swap's memory peak (its ledger's, SwapStats::planned_peak_bytes)
// stays within train state + the rollout's weights + one bucket, a bucket holding at
// most the rollout's weights; `rlcore conformance` holds a manager that claims it to it.
class RLCORE_API BoundedSwapMemory {
 public:
  static constexpr const char* kName = "bounded_swap_memory";
  virtual ~BoundedSwapMemory();
};

// Train engine: forward() that also gives Σ_v π_v² per response token, with
// π = softmax(logits / temperature) (verl's actor.calculate_sum_pi_squared, which
// the optimal-token-baseline estimators need).
class RLCORE_API ComputesSumPiSquared {
 public:
  static constexpr const char* kName = "sum_pi_squared";
  virtual ~ComputesSumPiSquared();
  // forward(batch, options), and `sum_pi_squared` set to [b, R] float32 (rlcore/rl_functional.h's
  // sum_pi_squared_from_logits over the positions forward() takes log-probs at).
  virtual ModelOutput forward_with_sum_pi_squared(const Batch& batch, const ForwardOptions& options,
                                                  at::Tensor& sum_pi_squared) = 0;
};

// Train engine: trains low-rank adapters over frozen base weights (LoRA), so a
// full weight is its frozen base, or for an adapted parameter base + a delta
// the adapters define. A sharding manager gathers the base once and afterwards
// rebuilds only the adapted weights, with no collective for the frozen ones.
class RLCORE_API TrainsLowRankAdapters {
 public:
  static constexpr const char* kName = "low_rank_adapters";
  virtual ~TrainsLowRankAdapters();
  // HF names of the full parameters that carry an adapter (empty: LoRA is off).
  virtual std::vector<std::string> adapted_parameters() const = 0;
  // As TrainEngine::for_each_full_parameter (collective, same order on every
  // rank), but every parameter's frozen base value, no adapter merged in.
  virtual void for_each_full_base_parameter(
      const std::function<void(const std::string&, const at::Tensor&)>& visit) = 0;
  // The full weight of adapted parameter `name` that for_each_full_parameter
  // would give, from its full base value `base`. Call it on every rank in the same order.
  virtual at::Tensor merged_parameter(const std::string& name, const at::Tensor& base) = 0;
};

// Train engine: gathers full parameters straight into memory the caller gives
// (a sharding manager's bucket), so a weight swap holds no gathered copy of
// its own. On NCCL a gather is one all-gather into that memory.
class RLCORE_API GathersIntoBuffers {
 public:
  static constexpr const char* kName = "gather_into_buffer";
  // What one collective of for_each_full_parameter brings in full: parameters
  // laid out in one flat buffer of `numel` elements (padding included).
  struct Gather {
    std::vector<std::string> names;  // HF names, in buffer (and visit) order
    std::vector<int64_t> offsets;    // element offset of each in the buffer
    std::vector<int64_t> numels;     // elements of each
    int64_t numel = 0;               // elements the collective writes
  };
  virtual ~GathersIntoBuffers();
  // The gathers for_each_full_parameter makes, in the order it makes them.
  virtual std::vector<Gather> full_parameter_gathers() const = 0;
  // As for_each_full_parameter, but gather i lands in `destination(i)` when
  // that is defined (1-D, contiguous, on the engine's device, at least
  // Gather::numel elements, of any floating dtype: the gather's values are
  // rounded to it), and `visit` sees views of it. An undefined destination,
  // or a gather whose values the engine computes rather than gathers (a
  // merged LoRA weight), visits tensors of the engine's own, as
  // for_each_full_parameter does. Collective; `destination` is asked once per
  // gather, in order, on every rank.
  virtual void for_each_full_parameter_into(
      const std::function<at::Tensor(size_t gather)>& destination,
      const std::function<void(const std::string&, const at::Tensor&)>& visit) = 0;
};

// Inference engine (SDK 5.1): generation request by request. Requests join
// the running decode batch as slots free up and leave it as they finish
// (continuous batching), can be streamed, aborted and resumed. The caller
// drives the engine with step(); the batch generate() stays and gives the
// same results. Not thread-safe beyond what the engine documents.
class RLCORE_API GeneratesRequests {
 public:
  static constexpr const char* kName = "requests";
  virtual ~GeneratesRequests();
  // Queues `request`. Throws ValueError naming the request for a bad one (a
  // duplicate id, n != 1, an empty or out-of-vocabulary prompt, prompt +
  // max_tokens past the engine's max_model_len) and OverloadedError when
  // max_waiting requests already wait; nothing is queued then.
  virtual void submit(GenerationRequest request) = 0;
  // Admits waiting requests into free slots (prefilling them), then samples
  // one token for every running request. Does nothing without requests.
  virtual StepOutput step() = 0;
  // Stops request `id` and returns what it generated (finish_reason kAbort),
  // or nothing for an unknown or already finished id.
  virtual std::optional<RequestOutput> abort(const std::string& id) = 0;
  virtual GenerationLoad load() const = 0;
};

// Inference engine (SDK 5.1): reports how its last generate() ran (batch
// occupancy, queueing, prefill sharing), for the trainer's rollout/* metrics.
class RLCORE_API ReportsGenerationStats {
 public:
  static constexpr const char* kName = "generation_stats";
  virtual ~ReportsGenerationStats();
  virtual GenerationStats last_generation_stats() const = 0;
};

// Inference engine of a mixture of experts (SDK 6.1): records which experts
// each token was routed to in every sparse layer, for routing replay (verl's
// rollout.enable_rollout_routing_replay, router_replay.mode R3).
class RLCORE_API RecordsRouting {
 public:
  static constexpr const char* kName = "records_routing";
  virtual ~RecordsRouting();
  // Records from the next generate() on (or stops recording).
  virtual void set_record_routing(bool enabled) = 0;
  // What the last generate() routed, one tensor per output in its order:
  // [prompt tokens + response tokens - 1, sparse layers, top_k] int64 on the
  // CPU (the last sampled token is never fed to the model). Empty when it did
  // not record; taking it clears it.
  virtual std::vector<at::Tensor> take_routing() = 0;
};

// Train engine of a mixture of experts (SDK 6.1): replays a recorded routing
// in its forward passes and records its own (routing replay, verl's
// actor.router_replay.mode: R2 records in the old-log-prob pass and replays in
// the update; R3 replays the rollout's in both).
class RLCORE_API ReplaysRouting {
 public:
  static constexpr const char* kName = "routing_replay";
  virtual ~ReplaysRouting();
  // For the next forward() / train_step() calls: with `replay`, each sparse
  // layer sends the tokens to the experts the Batch column
  // columns::kRoutedExperts names ([B, L, sparse layers, top_k] int16; -1: the
  // router's own choice); with `record`, forward() keeps what it routed.
  virtual void set_routing_replay(bool replay, bool record) = 0;
  // What the last recording forward() routed for this rank's rows, in the
  // column's layout; undefined when it did not record. Taking it clears it.
  virtual at::Tensor take_routing() = 0;
};

// The most likely tokens at one position, most likely first, with their log-probs.
struct TopLogprobs {
  std::vector<int32_t> token_ids;
  std::vector<float> logprobs;
};

// The log-prob a model gives one token of a sequence, against every token before it.
struct PositionLogprobs {
  float logprob = 0;
  int64_t rank = 0;  // 1: the most likely token there
  TopLogprobs top;
};

// Inference engine with request-level generation (SDK 6.3): log-probs beyond
// the sampled token's, for vLLM's `logprobs` / `top_logprobs` /
// `prompt_logprobs` and Tinker's compute_logprobs.
class RLCORE_API ReportsLogprobs {
 public:
  static constexpr const char* kName = "logprobs";
  virtual ~ReportsLogprobs();
  // GeneratesRequests::submit, and every token the request samples also
  // records the `top_logprobs` (>= 1) most likely tokens of the distribution it
  // was drawn from (the one its GeneratedTokens log-prob is from).
  virtual void submit_with_top_logprobs(GenerationRequest request, int64_t top_logprobs) = 0;
  // What request `id` recorded since the last take, one entry per sampled
  // token in order (resumed tokens have none). A finished or aborted request's
  // are kept until taken; empty for an unknown id.
  virtual std::vector<TopLogprobs> take_top_logprobs(const std::string& id) = 0;
  // For each position i in [1, ids.size()): log p(ids[i] | ids[0, i)) under
  // the model's own distribution (temperature 1, nothing filtered), its rank
  // there and the `top_logprobs` (>= 0) most likely tokens. Throws ValueError
  // for an empty or out-of-vocabulary sequence, or one past max_model_len.
  virtual std::vector<PositionLogprobs> score_tokens(const std::vector<int32_t>& ids, int64_t top_logprobs) = 0;
};

// The capability interface `Capability` of `component`, or null when it has none.
template <class Capability, class Component>
Capability* capability(Component& component) {
  return dynamic_cast<Capability*>(&component);
}

template <class Capability, class Component>
const Capability* capability(const Component& component) {
  return dynamic_cast<const Capability*>(&component);
}

template <class Capability, class Component>
bool supports(const Component& component) {
  return capability<Capability>(component) != nullptr;
}

// The names of the capabilities the type `T` declares, known at compile time:
// what PluginRegistrar::add records for `rlcore plugins`.
template <class T>
std::vector<std::string> capabilities_of() {
  std::vector<std::string> names;
  auto add = [&names](bool has, const char* name) {
    if (has) names.emplace_back(name);
  };
  add(std::is_base_of_v<AdoptsWeights, T>, AdoptsWeights::kName);
  add(std::is_base_of_v<DataParallel, T>, DataParallel::kName);
  add(std::is_base_of_v<TensorParallel, T>, TensorParallel::kName);
  add(std::is_base_of_v<PipelineParallel, T>, PipelineParallel::kName);
  add(std::is_base_of_v<OffloadsState, T>, OffloadsState::kName);
  add(std::is_base_of_v<Sleeps, T>, Sleeps::kName);
  add(std::is_base_of_v<RemoteGeneration, T>, RemoteGeneration::kName);
  add(std::is_base_of_v<BoundedSwapMemory, T>, BoundedSwapMemory::kName);
  add(std::is_base_of_v<ComputesSumPiSquared, T>, ComputesSumPiSquared::kName);
  add(std::is_base_of_v<TrainsLowRankAdapters, T>, TrainsLowRankAdapters::kName);
  add(std::is_base_of_v<GathersIntoBuffers, T>, GathersIntoBuffers::kName);
  add(std::is_base_of_v<GeneratesRequests, T>, GeneratesRequests::kName);
  add(std::is_base_of_v<ReportsGenerationStats, T>, ReportsGenerationStats::kName);
  add(std::is_base_of_v<RecordsRouting, T>, RecordsRouting::kName);
  add(std::is_base_of_v<ReplaysRouting, T>, ReplaysRouting::kName);
#if RLCORE_SDK_TARGET_ABI_MINOR >= 3
  add(std::is_base_of_v<ReportsLogprobs, T>, ReportsLogprobs::kName);
#endif
  return names;
}

// Every capability name, in the order capabilities_of() lists them.
RLCORE_API const std::vector<std::string>& capability_names();

}  // namespace rlcore
