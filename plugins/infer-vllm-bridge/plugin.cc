// The `infer-vllm-bridge` plugin: registers the `vllm_bridge` inference engine.
#include "rlcore/plugin.h"

#include "bridge_engine.h"

namespace rlcore::infer_vllm_bridge {
namespace {

void register_engine(PluginRegistrar& registrar) {
  registrar.add<InferenceEngine>(
      "vllm_bridge", "Generation by an external vLLM or SGLang server over HTTP (weights reloaded from disk snapshots)",
      OptionsSchema<BridgeOptions>()
          .key("server_url", &BridgeOptions::server_urls,
               "The server, http://host:port (required), or a list of servers of the same model: every rank "
               "spreads its requests over them, and each reloads every weights version.",
               {}, read_one_or_many)
          .key("api_key", &BridgeOptions::api_key,
               "Bearer key the server wants (vLLM --api-key); empty: $RLCORE_BRIDGE_API_KEY, else none.")
          .key("server_kind", &BridgeOptions::server_kind,
               "Which routes reload weights: vllm (VLLM_SERVER_DEV_MODE=1), sglang; auto asks the server.",
               one_of({"auto", "vllm", "sglang"}))
          .key("served_model_name", &BridgeOptions::served_model_name,
               "The model id to request; empty: the only one the server lists.")
          .key("weights_dir", &BridgeOptions::weights_dir,
               "Where weight snapshots are written; must be the same path on the server's hosts. Empty: a "
               "temporary directory (server on this host only).")
          .key("free_cache_engine", &BridgeOptions::free_cache_engine,
               "The server shares the trainer's GPUs: sleep it while training, wake weights then KV cache.")
          .key("sleep_level", &BridgeOptions::sleep_level, "vLLM's sleep level (1 offloads weights, 2 drops them).",
               in_range(1, 2))
          .key("max_model_len", &BridgeOptions::max_model_len,
               "Tokens (prompt + response) the run needs; the server must allow at least this many. 0: unchecked.",
               at_least(0))
          .key("prompts_per_request", &BridgeOptions::prompts_per_request, "Prompts per /v1/completions request.",
               at_least(1))
          .key("max_concurrent_requests", &BridgeOptions::max_concurrent_requests,
               "Requests in flight at once from each rank (a sliding window: the next request starts as soon as "
               "one is answered, so the server's continuous batching always has work).",
               at_least(1))
          .key("request_timeout_s", &BridgeOptions::request_timeout_s, "Seconds a request may take.", at_least(0.001))
          .key("connect_timeout_s", &BridgeOptions::connect_timeout_s, "Seconds to connect.", at_least(0.001))
          .key("max_retries", &BridgeOptions::max_retries,
               "Extra attempts for calls that are safe to repeat (health, models, completions) after a "
               "connection failure or a 5xx/429.",
               at_least(0))
          .key("retry_backoff_s", &BridgeOptions::retry_backoff_s, "First wait between attempts; doubles each time.",
               at_least(0))
          .key("reload_timeout_s", &BridgeOptions::reload_timeout_s, "Seconds a weight reload may take.",
               at_least(0.001)),
      [](const BridgeOptions& options, const ComponentContext& context) {
        return std::make_unique<BridgeEngine>(options, context);
      });
}

}  // namespace
}  // namespace rlcore::infer_vllm_bridge

RLCORE_PLUGIN("infer-vllm-bridge", "0.1.0", rlcore::infer_vllm_bridge::register_engine)
