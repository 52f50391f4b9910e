// The options of the `vllm_bridge` inference engine (actor_rollout_ref.rollout.*).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rlcore::infer_vllm_bridge {

struct BridgeOptions {
  // server_url: http://host:port of a vLLM / SGLang / rlcore serve server, or a
  // list of them (replicas of one model: requests spread over them, each reloads).
  std::vector<std::string> server_urls;
  std::string api_key;                   // Bearer key; empty: $RLCORE_BRIDGE_API_KEY, else none
  std::string server_kind = "auto";      // auto | vllm | sglang
  std::string served_model_name;         // empty: the only model the server lists
  std::string weights_dir;               // where weight snapshots go; empty: <temp>/rlcore-vllm-bridge-<pid>
  bool free_cache_engine = false;        // colocated: sleep the server while the trainer trains
  int64_t sleep_level = 1;               // vLLM's /sleep level (1: offload weights, 2: discard them)
  int64_t max_model_len = 0;             // > 0: the server must allow at least this many tokens
  int64_t prompts_per_request = 8;       // small requests: the server batches them continuously
  int64_t max_concurrent_requests = 16;  // a sliding window of requests in flight per rank
  double request_timeout_s = 600;
  double connect_timeout_s = 10;
  int64_t max_retries = 3;
  double retry_backoff_s = 0.5;
  double reload_timeout_s = 900;
};

}  // namespace rlcore::infer_vllm_bridge
