// Server: the HTTP side of `rlcore serve`, event-driven (Boost.Beast on
// Boost.Asio, kept out of this header): connections are multiplexed on a few
// I/O threads, and answers the engine's requests produce are written as they
// come, so thousands of clients cost no thread each. Routes, bearer-token
// auth, body-size limit, keep-alive and pipelining, error objects for
// 401/404/413/504, a per-request deadline, and a clean stop from another thread.
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
  // > 0: a completion still running after this many seconds is aborted and
  // answered 504 (a stream: an error event, then [DONE]).
  double request_timeout_s = 0;
  // An idle keep-alive connection is closed after this long (uvicorn's, so vLLM's, default).
  double keep_alive_timeout_s = 5;
  int io_threads = 2;       // threads that read, parse and write every connection
  int handler_threads = 8;  // threads for calls that may wait (reloads, a paused server)
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
  // accept loop failed rather than being stopped. Answers in flight at stop()
  // are finished first.
  bool serve();
  // Makes serve() return; safe from any thread, before or during serve().
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlcore::serve
