// The routes of `rlcore serve` without HTTP: request body in, status and JSON
// body out. With an engine that has the GeneratesRequests capability,
// concurrent completions share its decode steps (RequestDriver) and are
// answered later, through a ResponseSink, without a thread waiting for them;
// otherwise generation is serialised onto the engine and the call waits for it.
// Everything else runs concurrently.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rlcore/core/serve/engine_use.h"
#include "rlcore/core/serve/generation_gate.h"
#include "rlcore/core/serve/requests.h"
#include "rlcore/core/serve/served_model.h"
#include "rlcore/export.h"
#include "rlcore/inference_engine.h"

namespace rlcore::serve {

// Where an answer produced later goes; every call is safe from any thread.
class RLCORE_API ResponseSink {
 public:
  virtual ~ResponseSink();
  // The whole answer, a JSON body (ends it).
  virtual void reply(int status, std::string body) = 0;
  // One server-sent event of a 200 text/event-stream answer, written as it comes.
  virtual void event(std::string event) = 0;
  // The stream's end.
  virtual void end_events() = 0;
  // `cancel` runs once if the answer will not be read: the client has gone,
  // or its deadline passed. At once when that happened already.
  virtual void on_cancel(std::function<void()> cancel) = 0;
};

struct ApiResponse {
  int status = 200;
  std::string body;  // JSON text ("" for /health)
  // A streamed answer (`"stream": true`): server-sent events, sent in order
  // as text/event-stream instead of `body`.
  std::vector<std::string> events;
  // An answer produced later: `deferred(sink)` returns at once, and the
  // answer (a reply, or events then their end) goes to the sink.
  std::function<void(std::shared_ptr<ResponseSink>)> deferred;
};

// A deferred answer waited for on this thread (tests, fuzzers, callers
// without an event loop): what `response` holds otherwise.
RLCORE_API ApiResponse settle(ApiResponse response);

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
  // One generation, with the engine to itself (an engine that does not run requests).
  GenerationOutput generate(const PreparedCompletion& prepared);
  // An answer the engine's requests produce (it runs requests): streamed,
  // each event sent as its token is sampled (`encoder(request, prepared)`
  // shapes the route's chunks), or whole (`build(output)` its body).
  using EncoderFactory =
      std::function<std::unique_ptr<class StreamEncoder>(const CompletionRequest&, const PreparedCompletion&)>;
  using BodyBuilder = std::function<std::string(const GenerationOutput&, const ReportedLogprobs&)>;
  ApiResponse deferred_answer(const char* route, const std::string& id, CompletionRequest request,
                              PreparedCompletion prepared, EncoderFactory encoder, BodyBuilder build);

  std::shared_ptr<InferenceEngine> engine_;
  ServedModel model_;
  RequestLimits limits_;
  // Generations share it with a RequestDriver (they share decode steps),
  // own it without one; with_engine() owns it.
  EngineUse engine_use_;
  std::unique_ptr<class RequestDriver> driver_;  // when the engine has GeneratesRequests
  GenerationGate gate_;
};

// The body of an error answer: vLLM's error object as JSON text.
RLCORE_API std::string error_text(int status, const std::string& type, const std::string& message);

}  // namespace rlcore::serve
