// NativeEngine: the `native` InferenceEngine of the infer-native plugin. Serves
// an HF checkpoint with the SDK Transformer and a KV cache, on CPU or one
// device, optionally tensor-parallel over the pool's kRolloutTpGroup.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "decode_step.h"
#include "fifo_mutex.h"
#include "rlcore/capabilities.h"
#include "rlcore/generation_request.h"
#include "rlcore/comm_context.h"
#include "rlcore/inference_engine.h"
#include "rlcore/model/transformer.h"
#include "rlcore/registry.h"
#include "rlcore/sharding_manager.h"
#include "scheduler.h"

namespace rlcore::infer_native {

struct NativeEngineOptions {
  std::string dtype = "auto";              // auto (config.json's torch_dtype) | float32 | bfloat16
  int64_t max_model_len = 0;               // prompt + response tokens; 0: max_position_embeddings
  int64_t max_num_seqs = 256;              // sequences in the decode batch at once; more wait for a free slot
  int64_t max_waiting_requests = 4096;     // submit() refuses more waiting requests (OverloadedError)
  bool enable_prefix_caching = true;       // samples of one prompt admitted together share its prefill
  bool static_batching = false;            // admit only into an empty batch (the pre-5.1 behaviour; benchmarks)
  int64_t seed = 0;                        // seeds requests that give no seed (SamplingParams::seed = -1)
  int64_t tensor_model_parallel_size = 1;  // ranks of kRolloutTpGroup sharing one model (Megatron layout)
  bool enforce_eager = false;              // false: decode steps replayed as CUDA graphs (one GPU, no TP), as in verl
};

class NativeEngine final : public InferenceEngine,
                           public GeneratesRequests,
                           public ReportsLogprobs,
                           public ReportsGenerationStats,
                           public RecordsRouting,
                           public AdoptsWeights,
                           public TensorParallel,
                           public Sleeps {
 public:
  // A caller that never takes a finished request's top log-probs (its client
  // left) must not grow the engine: the oldest untaken are dropped past this.
  static constexpr std::size_t kFinishedTopKept = 4096;
  // Loads the checkpoint at context.model_path onto context.device (this
  // rank's tensor-parallel shard when tensor_model_parallel_size > 1: the
  // group is context.comm's kRolloutTpGroup, of exactly that size). Throws
  // ConfigError for a bad option (a TP size that does not divide the heads or
  // intermediate_size, a missing group), an empty/missing model_path or
  // device; the loaders' errors name the file or tensor.
  NativeEngine(const NativeEngineOptions& options, const ComponentContext& context);

  // Throws ValueError for invalid sampling params, an empty or out-of-vocabulary
  // prompt, a prompt that leaves no room under max_model_len, or when asleep
  // or woken without every weight reloaded since. With tensor parallelism it
  // is collective: every rank of the TP group must call it with the same
  // prompts and sampling (checked: a mismatch is a ValueError on every rank),
  // and every rank returns the same output.
  GenerationOutput generate(const std::vector<std::vector<int32_t>>& prompts, const SamplingParams& sampling) override;

  // Request-level generation (native_requests.cc), continuous batching over
  // the engine's own Scheduler. Thread-safe: calls serialise on the engine's
  // mutex (first come, first served), so one thread drives step() while
  // others submit and abort, each waiting at most for the step in progress. Not
  // with tensor parallelism (submit() refuses; generate() is collective).
  // submit() also refuses while asleep; sleep() refuses with requests in
  // flight. A token's weight version is the engine's version when it was
  // sampled: load_weights() between steps keeps requests running (their
  // cached keys and values from the older weights).
  void submit(GenerationRequest request) override;
  StepOutput step() override;
  std::optional<RequestOutput> abort(const std::string& id) override;
  GenerationLoad load() const override;

  // ReportsLogprobs (native_logprobs.cc). The top log-probs are taken from
  // the distribution each token is sampled from, in the same step; a
  // sequence is scored by one full forward, as the trainer computes log-probs.
  void submit_with_top_logprobs(GenerationRequest request, int64_t top_logprobs) override;
  std::vector<TopLogprobs> take_top_logprobs(const std::string& id) override;
  std::vector<PositionLogprobs> score_tokens(const std::vector<int32_t>& ids, int64_t top_logprobs) override;

  // This rank's shard shapes (tp_shard_shape) under their HF names.
  std::vector<WeightMeta> weight_meta() const override;
  // Partial loads are allowed; ValueError names an unknown or misshapen tensor
  // (and nothing is loaded then), or says the engine is asleep. After
  // wake_up_unallocated(), a contiguous tensor already in the engine's dtype
  // and device is adopted as the parameter (zero-copy: the engine then shares
  // the caller's storage, which the caller must not modify); anything else is
  // copied and converted into storage the engine owns.
  void load_weights(const NamedTensorList& weights, int64_t version) override;
  int64_t weight_version() const override;

  // sleep() drops the parameters' storage (the KV cache only lives inside
  // generate()); wake_up() reallocates it uninitialised, wake_up_unallocated()
  // does not (for adopting buckets): load_weights() must then supply every
  // parameter before generate() runs again.
  void sleep() override;
  void wake_up() override;
  void wake_up_unallocated() override;
  int64_t weight_bytes_held() const override { return bytes_held(); }

  bool asleep() const;
  // The live parameters (views, not copies), e.g. to check a weight swap.
  model::NamedTensors parameters() const;
  int64_t bytes_held() const;      // parameter storage now held
  int64_t bytes_released() const;  // what the last sleep() freed
  const model::ModelConfig& config() const { return model_->config(); }
  int64_t max_model_len() const { return max_model_len_; }
  at::ScalarType dtype() const { return dtype_; }
  int64_t tp_size() const { return tp_group_ ? tp_group_->size() : 1; }
  int64_t tp_rank() const { return tp_group_ ? tp_group_->rank() : 0; }
  // How decode steps run: kDeviceGraph when enforce_eager is false on a GPU
  // without tensor parallelism, otherwise kEager.
  DecodeMode decode_mode() const { return decode_mode_; }
  // Routing replay (RecordsRouting): generate() records each output's routing
  // (decoding without CUDA graphs while it does); ConfigError for a dense model.
  void set_record_routing(bool enabled) override;
  std::vector<at::Tensor> take_routing() override;

  // What the last generate() call's scheduler did.
  DecodeStats last_decode_stats() const;
  GenerationStats last_generation_stats() const override;  // the same, in the SDK's terms
  // What the request scheduler did since the previous call.
  DecodeStats take_request_stats();

 private:
  int64_t held_bytes_locked() const;
  bool adoptable(const at::Tensor& tensor, const at::Tensor& slot) const;
  void check_same_request_across_tp(const std::vector<std::vector<int32_t>>& prompts,
                                    const SamplingParams& sampling) const;
  void check_ready(const char* call) const;
  SchedulerOptions scheduler_options() const;
  uint64_t request_seed(int64_t seed);  // `seed`, or a drawn one for -1
  void submit_locked(GenerationRequest request, int64_t top_logprobs);
  // A finished or aborted sequence as its output; what it recorded of its
  // top log-probs waits in finished_top_ until taken.
  RequestOutput take_output(Sequence& seq);

  // One call at a time (e.g. `rlcore serve` threads), granted in arrival
  // order so that step() called back to back cannot starve submit().
  mutable FifoMutex mutex_;
  NativeEngineOptions options_;
  std::unique_ptr<model::Transformer> model_;
  std::optional<CommGroup> tp_group_;              // set when tensor_model_parallel_size > 1
  std::vector<model::ParameterSpec> local_specs_;  // this rank's parameter shapes
  at::ScalarType dtype_;
  int64_t max_model_len_ = 0;
  DecodeMode decode_mode_ = DecodeMode::kEager;
  DecodeStats last_decode_stats_;
  int64_t version_ = 0;
  bool asleep_ = false;
  int64_t bytes_released_ = 0;
  std::set<std::string> adopted_;     // parameters that are views of a caller's tensor
  std::set<std::string> not_loaded_;  // parameters not reloaded since wake_up()
  at::Generator request_seeds_;       // draws the seed of each unseeded request
  std::unique_ptr<Scheduler> requests_;
  std::map<std::string, std::vector<TopLogprobs>> finished_top_;  // by request id, not yet taken
  std::deque<std::string> finished_top_order_;  // finished_top_'s ids, oldest first (kept at most kFinishedTopKept)
  bool record_routing_ = false;
  std::vector<at::Tensor> routing_;  // the last generate()'s, per output  // the GeneratesRequests queue and batch
};

}  // namespace rlcore::infer_native
