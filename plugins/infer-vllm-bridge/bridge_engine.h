// The `vllm_bridge` inference engine: generation, weights and memory of an
// external vLLM or SGLang server (or `rlcore serve --dev-mode`), over its
// public HTTP routes only.
//
// Every rank of the pool sends its own prompts; rank 0 alone writes weight
// snapshots and drives the server's reloads and sleep/wake-up, and tells the
// other ranks whether a reload worked, so no rank generates on stale weights.
// With several servers (replicas of one model) a rank's requests go round the
// servers, starting at its rank, and rank 0 drives every server at once.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bridge_options.h"
#include "common/http/http_json_client.h"
#include "rlcore/capabilities.h"
#include "rlcore/comm_context.h"
#include "rlcore/inference_engine.h"
#include "rlcore/registry.h"
#include "server_control.h"
#include "weight_snapshots.h"

namespace rlcore::infer_vllm_bridge {

using http::HttpJsonClient;
using http::HttpReply;
using http::HttpSettings;
using http::Retry;

class BridgeEngine final : public InferenceEngine, public RemoteGeneration, public Sleeps {
 public:
  // Checks every server (health, model, max_model_len, kind) before returning:
  // ConfigError / IoError name the URL and what is wrong.
  BridgeEngine(const BridgeOptions& options, const ComponentContext& context);
  ~BridgeEngine() override;

  GenerationOutput generate(const std::vector<std::vector<int32_t>>& prompts, const SamplingParams& sampling) override;

  // The checkpoint's tensors at context.model_path (the model the server runs).
  std::vector<WeightMeta> weight_meta() const override;
  // Rank 0: snapshot to disk, reload on the server, check the version; on a
  // failed reload the last good snapshot is reloaded and this throws.
  void load_weights(const NamedTensorList& weights, int64_t version) override;
  int64_t weight_version() const override;

  // With free_cache_engine: the server releases its memory / takes its weights
  // back (the KV cache follows once the new weights are loaded). Otherwise no-ops.
  void sleep() override;
  void wake_up() override;

  const ServerInfo& server() const { return servers_.front()->info; }  // the first server's
  size_t server_count() const { return servers_.size(); }
  const std::filesystem::path& weights_dir() const;

 private:
  // One server and the client that talks to it (ServerControl keeps a reference to the client).
  struct Server {
    Server(const HttpSettings& settings, const BridgeOptions& options);
    HttpJsonClient http;
    ServerInfo info;
    ServerControl control;
  };

  bool leader() const;
  // Runs `action` on every server at once; after all have finished, throws the
  // first failure (by server order).
  void on_every_server(const std::function<void(const Server&)>& action) const;
  void reload_every_server(const std::filesystem::path& dir, int64_t version) const;
  // Rank 0's outcome on every rank: throws on all ranks when rank 0 failed.
  void share_outcome(const std::string& failure, const std::string& what) const;
  void check_server_weight_version() const;
  void wake_kv_cache_if_asleep();
  GenerationOutput generate_chunks(const std::vector<std::vector<int32_t>>& prompts,
                                   const SamplingParams& sampling) const;

  mutable std::mutex mutex_;  // one call at a time
  BridgeOptions options_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::vector<WeightMeta> meta_;
  std::optional<CommGroup> world_;            // set with more than one rank
  std::optional<WeightSnapshots> snapshots_;  // rank 0 only
  bool owns_weights_dir_ = false;
  std::filesystem::path last_good_;
  int64_t version_ = 0;
  bool weights_asleep_ = false;
  bool kv_cache_asleep_ = false;
};

}  // namespace rlcore::infer_vllm_bridge
