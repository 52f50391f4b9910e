// The routes of `rlcore serve` without HTTP: request body in, status and JSON
// body out. With an engine that has the GeneratesRequests capability,
// concurrent completions share its decode steps (RequestDriver); otherwise
// generation is serialised onto the engine. Everything else runs concurrently.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "rlcore/core/serve/generation_gate.h"
#include "rlcore/core/serve/requests.h"
#include "rlcore/core/serve/served_model.h"
#include "rlcore/export.h"
#include "rlcore/inference_engine.h"

namespace rlcore::serve {

struct ApiResponse {
  int status = 200;
  std::string body;  // JSON text ("" for /health)
  // A streamed answer (`"stream": true`): server-sent events, sent in order
  // as text/event-stream instead of `body`.
  std::vector<std::string> events;
  // A streamed answer produced while it is sent: `live(write)` writes each
  // event as it is ready; write returns false once the client has gone.
  std::function<void(const std::function<bool(const std::string&)>& write)> live;
};

class RLCORE_API OpenAiApi {
 public:
  OpenAiApi(std::shared_ptr<InferenceEngine> engine, ServedModel model, RequestLimits limits = {});
  ~OpenAiApi();

  ApiResponse completions(const std::string& body);
  // The messages through the checkpoint's chat template, then as completions.
  ApiResponse chat_completions(const std::string& body);
  ApiResponse tokenize(const std::string& body);
  ApiResponse detokenize(const std::string& body);
  ApiResponse models() const;
  ApiResponse version() const;

  const ServedModel& model() const { return model_; }

  // Runs `use(engine)` with the engine to itself (waits for the generations
  // in flight, holds new ones back): how the dev-mode routes reload weights and
  // sleep. With a RequestDriver it runs on the driver's stepping thread, the
  // one thread that runs the engine's kernels (request_driver.h says why);
  // while frozen it runs between two steps of the requests in flight.
  void with_engine(const std::function<void(InferenceEngine&)>& use);
  // Ends the generations in flight (finish reason abort) where the engine
  // runs requests; otherwise they run to their end. vLLM's /pause?mode=abort.
  void abort_generations();
  // vLLM's /pause?mode=keep where the engine runs requests: stops stepping
  // after the step in progress, leaving the requests in flight where they
  // are (RequestDriver::freeze); false, doing nothing, without requests.
  bool freeze_generations();
  // Steps the frozen requests again; `recompute_cache`: each first restarts
  // from its tokens so far under the weights loaded meanwhile (vLLM's clear_cache).
  void thaw_generations(bool recompute_cache);
  // Ends the generation of completion `id` (its "cmpl-..." / "chatcmpl-..." id)
  // where the engine runs requests; false when none of its requests is in flight.
  bool abort_generation(const std::string& id);
  // Whether completions are taken (vLLM's /pause and /resume).
  GenerationGate& gate() { return gate_; }

 private:
  // One generation, with the engine to itself.
  GenerationOutput generate(const PreparedCompletion& prepared, const std::string& id);
  // A streamed answer whose events are sent as the engine samples the tokens
  // (the engine runs requests); `encoder(request, prepared)` shapes the route's chunks.
  using EncoderFactory =
      std::function<std::unique_ptr<class StreamEncoder>(const CompletionRequest&, const PreparedCompletion&)>;
  ApiResponse live_stream(const char* route, const std::string& id, CompletionRequest request,
                          PreparedCompletion prepared, EncoderFactory encoder);

  std::shared_ptr<InferenceEngine> engine_;
  ServedModel model_;
  RequestLimits limits_;
  // Generations hold it shared with a RequestDriver (they share decode steps),
  // exclusive without one; with_engine() holds it exclusive.
  std::shared_mutex engine_mutex_;
  std::unique_ptr<class RequestDriver> driver_;  // when the engine has GeneratesRequests
  GenerationGate gate_;
};

// The body of an error answer: vLLM's error object as JSON text.
RLCORE_API std::string error_text(int status, const std::string& type, const std::string& message);

}  // namespace rlcore::serve
