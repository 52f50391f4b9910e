// InferenceEngine: the `inference_engine` plugin kind. Generates responses for
// batches of token-id prompts and exposes its weights for the hybrid engine's
// swapping (weight_meta / load_weights / sleep / wake_up).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/export.h"

namespace rlcore {

struct SamplingParams {
  int64_t n = 1;                        // samples per prompt
  int64_t max_tokens = 16;              // response length limit
  double temperature = 1.0;             // 0 means greedy
  int64_t top_k = -1;                   // -1: disabled
  double top_p = 1.0;                   // 1: disabled
  int64_t seed = -1;                    // -1: nondeterministic; otherwise reproducible sampling
  std::vector<int32_t> stop_token_ids;  // e.g. EOS; the stop token is part of the response
};

// kAbort (SDK 5.1): stopped by GeneratesRequests::abort, never by generate().
enum class FinishReason { kStop, kLength, kAbort };
RLCORE_API const char* finish_reason_name(FinishReason reason);  // "stop" | "length" | "abort"

// Prompt-major: prompt i's sample j is at index i * n + j.
struct GenerationOutput {
  std::vector<std::vector<int32_t>> token_ids;
  // Log-prob of each sampled token under the temperature-scaled distribution
  // (the one the trainer uses for old log-probs).
  std::vector<std::vector<float>> logprobs;
  std::vector<FinishReason> finish_reasons;
  int64_t weight_version = 0;  // the version of the weights that generated this
};

struct WeightMeta {
  std::string name;  // HF parameter name
  std::vector<int64_t> shape;
  at::ScalarType dtype;
};

using NamedTensorList = std::vector<std::pair<std::string, at::Tensor>>;

// The process group (CommContext) a tensor-parallel rollout runs its
// collectives in: tensor_model_parallel_size consecutive ranks of the pool.
// The trainer adds it to the actor pool's mesh (see docs/hybrid-engine.md).
inline constexpr const char* kRolloutTpGroup = "rollout_tp";

class RLCORE_API InferenceEngine {
 public:
  static constexpr const char* kKind = "inference_engine";

  virtual ~InferenceEngine();

  virtual GenerationOutput generate(const std::vector<std::vector<int32_t>>& prompts,
                                    const SamplingParams& sampling) = 0;

  // Names, shapes and dtypes of the parameters this engine holds (its own layout).
  virtual std::vector<WeightMeta> weight_meta() const = 0;
  // Replaces weights by name (a subset is allowed: buckets arrive one at a time);
  // `version` is reported back by later generate() calls.
  virtual void load_weights(const NamedTensorList& weights, int64_t version) = 0;
  virtual int64_t weight_version() const = 0;

  // Release weights and KV-cache memory / restore them.
  virtual void sleep() = 0;
  virtual void wake_up() = 0;
};

}  // namespace rlcore
