// `rlcore serve --dev-mode`: the routes RL trainers use on vLLM (started with
// VLLM_SERVER_DEV_MODE=1) and on SGLang, with their bodies: sleep and wake
// up, pause and resume, reloading weights from a checkpoint directory, and a
// weights version. They make `rlcore serve` a stand-in for either server
// (the vllm_bridge's tests run against it). docs/serve.md lists them.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rlcore/core/serve/api.h"
#include "rlcore/export.h"

namespace rlcore::serve {

class RLCORE_API DevModeApi {
 public:
  // `model_dir`: the checkpoint the engine was loaded from (what a level-1
  // sleep gives back on wake-up).
  DevModeApi(std::shared_ptr<OpenAiApi> api, std::string model_dir);

  // vLLM.
  ApiResponse sleep(const std::string& level);
  ApiResponse wake_up(const std::vector<std::string>& tags);  // none: everything
  ApiResponse is_sleeping() const;
  ApiResponse reset_prefix_cache() const;
  // mode abort | wait | keep; clear_cache (keep only, default true as vLLM):
  // the frozen requests' caches are recomputed at /resume under the new weights.
  ApiResponse pause(const std::string& mode, const std::string& clear_cache = "true");
  ApiResponse resume();
  ApiResponse is_paused() const;
  ApiResponse collective_rpc(const std::string& body);  // method "reload_weights" only
  ApiResponse update_weight_version(const std::string& body);
  ApiResponse weight_info() const;

  // SGLang.
  ApiResponse update_weights_from_disk(const std::string& body);
  ApiResponse release_memory_occupation(const std::string& body);
  ApiResponse resume_memory_occupation(const std::string& body);
  ApiResponse model_info() const;
  // {"rid": "<completion id>"} ends that completion's requests, {"abort_all": true} every one
  // (where the engine runs requests); 200 with an empty body either way, as SGLang.
  ApiResponse abort_request(const std::string& body);

 private:
  // Checks the whole directory against the engine's parameters, then loads it.
  void load_directory(const std::string& dir);
  void sleep_engine(int64_t level);
  void wake_engine(bool weights, bool kv_cache);

  std::shared_ptr<OpenAiApi> api_;
  mutable std::mutex mutex_;  // the state below
  std::string weights_dir_;   // where the engine's current weights came from
  std::string weight_version_ = "default";
  int64_t sleep_level_ = 0;
  bool weights_asleep_ = false;
  bool kv_cache_asleep_ = false;
  bool recompute_at_resume_ = true;  // the last /pause?mode=keep's clear_cache
};

}  // namespace rlcore::serve
