// The `infer-native` plugin: registers the `native` inference engine and its options.
#include "rlcore/plugin.h"

#include "native_engine.h"

namespace rlcore::infer_native {
namespace {

OptionsSchema<NativeEngineOptions> native_options_schema() {
  return OptionsSchema<NativeEngineOptions>()
      .key("dtype", &NativeEngineOptions::dtype,
           "Compute dtype; auto takes config.json's torch_dtype (float16 runs as float32).",
           one_of({"auto", "float32", "bfloat16"}))
      .key("max_model_len", &NativeEngineOptions::max_model_len,
           "Most prompt + response tokens per sequence; 0 takes max_position_embeddings.", at_least(0))
      .key("max_num_seqs", &NativeEngineOptions::max_num_seqs,
           "Most sequences in the decode batch at once (verl's rollout.max_num_seqs); more wait and join as "
           "others finish (continuous batching).",
           at_least(1))
      .key("max_waiting_requests", &NativeEngineOptions::max_waiting_requests,
           "Most requests waiting for a slot; request-level submissions beyond it are refused (HTTP 503 "
           "from rlcore serve).",
           at_least(1))
      .key("enable_prefix_caching", &NativeEngineOptions::enable_prefix_caching,
           "Samples of one prompt admitted together share one prefill (verl's / vLLM's key); false "
           "prefills each sample.")
      .key("static_batching", &NativeEngineOptions::static_batching,
           "true: a batch runs to its end before waiting sequences start (the behaviour before continuous "
           "batching, kept as a benchmark baseline).")
      .key("seed", &NativeEngineOptions::seed,
           "Seeds the per-request seeds of requests that give none (sampling seed -1).", at_least(0))
      .key("tensor_model_parallel_size", &NativeEngineOptions::tensor_model_parallel_size,
           "Ranks sharing one model copy (Megatron TP layout) over the pool's rollout_tp group; must divide "
           "the model's attention heads, kv heads and intermediate_size.",
           at_least(1))
      .key("enforce_eager", &NativeEngineOptions::enforce_eager,
           "false (verl's default): decode steps are recorded once per batch shape and replayed as CUDA "
           "graphs on a GPU with tensor_model_parallel_size 1 (elsewhere they run eagerly); true: always "
           "eagerly.");
}

void register_engine(PluginRegistrar& registrar) {
  registrar.add<InferenceEngine>(
      "native",
      "Generation with the built-in Llama/Qwen2/Qwen3 Transformer, a KV cache and continuous batching (libtorch)",
      native_options_schema(), [](const NativeEngineOptions& options, const ComponentContext& context) {
        return std::make_unique<NativeEngine>(options, context);
      });
  registrar.add_parallel_sizes<InferenceEngine>(
      "native", native_options_schema(), [](const NativeEngineOptions& options) {
        ParallelSizes sizes;
        sizes.tp = {options.tensor_model_parallel_size, "tensor_model_parallel_size"};
        return sizes;
      });
}

}  // namespace
}  // namespace rlcore::infer_native

RLCORE_PLUGIN("infer-native", "0.1.0", rlcore::infer_native::register_engine)
