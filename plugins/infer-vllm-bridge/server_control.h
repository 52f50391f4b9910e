// What the bridge asks of a server beyond generation, in each server's own
// routes: checks before the first step, sleep / wake-up when it shares the
// trainer's GPUs, and loading a weights directory from disk.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "common/http/http_json_client.h"

namespace rlcore::infer_vllm_bridge {

using http::HttpJsonClient;
using http::HttpReply;
using http::HttpSettings;
using http::Retry;

enum class ServerKind { kVllm, kSglang };
const char* server_kind_name(ServerKind kind);

struct ServerExpectations {
  std::string kind = "auto";      // auto | vllm | sglang
  std::string served_model_name;  // empty: the only model the server lists
  int64_t max_model_len = 0;      // > 0: the server must allow at least this many tokens
};

struct ServerInfo {
  ServerKind kind = ServerKind::kVllm;
  std::string version;        // the server's /version, or "unknown"
  std::string model;          // the id sent as "model"
  int64_t max_model_len = 0;  // 0 when the server does not say
};

// GET /health, /v1/models, /version and the routes that tell vLLM's dev mode
// from SGLang. ConfigError for a server that does not serve what the config
// asks (naming what it does serve); IoError when it cannot be reached.
ServerInfo probe_server(const HttpJsonClient& http, const ServerExpectations& expected);

class ServerControl {
 public:
  ServerControl(const HttpJsonClient& http, ServerKind kind, double reload_timeout_s);

  void sleep(int64_t level) const;
  // vLLM wants the weights back before the KV cache (verl and OpenRLHF found
  // that waking both at once can run out of memory while weights reload).
  void wake_weights() const;
  void wake_kv_cache() const;

  // Loads the checkpoint directory `dir` as weights version `version`. vLLM:
  // pause (wait for requests in flight), collective_rpc reload_weights, reset
  // the prefix cache, set the version where the server keeps one, resume (also
  // after a failure). SGLang: update_weights_from_disk with the version (it
  // flushes the cache itself). IoError quoting the server.
  void load_weights(const std::filesystem::path& dir, int64_t version) const;
  // The version the server reports (vLLM's /weight_info, SGLang's /model_info),
  // or nullopt when it keeps none.
  std::optional<std::string> weight_version() const;

 private:
  void load_weights_vllm(const std::filesystem::path& dir, int64_t version) const;
  void load_weights_sglang(const std::filesystem::path& dir, int64_t version) const;

  const HttpJsonClient& http_;
  ServerKind kind_;
  double reload_timeout_s_;
  std::string version_route_;  // where the server reports its weights version; empty: it keeps none
};

}  // namespace rlcore::infer_vllm_bridge
