// Server: the HTTP side of `rlcore serve` (cpp-httplib, kept out of this
// header): routes, bearer-token auth, body-size limit, error objects for
// 401/404/413, and a clean stop from another thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "rlcore/core/serve/api.h"
#include "rlcore/core/serve/dev_mode.h"
#include "rlcore/export.h"

namespace rlcore::serve {

struct ServerOptions {
  std::string api_key;                           // "" : no authentication
  std::size_t max_body_bytes = 4 * 1024 * 1024;  // larger bodies get 413
  // Set: the dev-mode routes (vLLM's VLLM_SERVER_DEV_MODE=1 and SGLang's) are served too.
  std::shared_ptr<DevModeApi> dev_mode;
};

class RLCORE_API Server {
 public:
  Server(std::shared_ptr<OpenAiApi> api, ServerOptions options = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port (port 0 picks a free one) and returns the bound port.
  // Throws IoError naming host:port when the address cannot be bound.
  int bind(const std::string& host, int port);
  // Answers requests on the bound socket until stop(); returns false when the
  // accept loop failed rather than being stopped.
  bool serve();
  // Makes serve() return; safe from any thread, before or during serve().
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlcore::serve
