// One completion answered by the engine's requests as they run: the
// RequestDriver's callbacks build the answer (a live stream's events, or the
// whole body at the end) and hand it to a ResponseSink. What arrives before
// the sink is attached is kept and sent first, so the requests can be started
// (and refused with an ordinary error) before the HTTP side takes the answer.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rlcore/core/serve/api.h"
#include "rlcore/core/serve/requests.h"
#include "rlcore/core/serve/served_model.h"
#include "rlcore/core/serve/stream.h"
#include "serve/request_driver.h"

namespace rlcore::serve {

class DeferredAnswer : public std::enable_shared_from_this<DeferredAnswer> {
 public:
  using EncoderFactory =
      std::function<std::unique_ptr<StreamEncoder>(const CompletionRequest&, const PreparedCompletion&)>;
  using BodyBuilder = std::function<std::string(const GenerationOutput&, const ReportedLogprobs&)>;

  // `encoder` set: a stream; else `build(output)` is the whole body. `held`
  // (the gate ticket, the engine use) is released when the answer ends.
  DeferredAnswer(const char* route, CompletionRequest request, PreparedCompletion prepared, const ServedModel& model,
                 EncoderFactory encoder, BodyBuilder build, std::vector<std::shared_ptr<void>> held);

  // The driver's callbacks; a stream's first events are made here.
  RequestDriver::Listener listener();
  // The prompts' log-probs for the whole answer (before the requests start).
  void set_prompt_logprobs(std::vector<std::vector<PositionLogprobs>> scores);
  // From now on the answer goes to `sink` (what came before, first); `cancel`
  // runs when the sink is told the answer will not be read.
  void attach(std::shared_ptr<ResponseSink> sink, std::function<void()> cancel);

  const CompletionRequest& request() const { return request_; }
  const PreparedCompletion& prepared() const { return prepared_; }

 private:
  void on_token(const RequestDriver::Token& token);
  void on_done(RequestDriver::CallOutput output);
  void on_error(const std::string& error);
  // mutex_ held.
  void send_event(std::string event);
  void send_end();
  void send_reply(int status, std::string body);

  const char* route_;
  CompletionRequest request_;
  PreparedCompletion prepared_;
  BodyBuilder build_;
  std::vector<std::vector<PositionLogprobs>> prompt_logprobs_;
  std::mutex mutex_;
  std::unique_ptr<LiveStream> stream_;  // streams only
  bool ended_ = false;
  std::shared_ptr<ResponseSink> sink_;
  std::vector<std::string> early_events_;  // before attach()
  bool early_end_ = false;                 // the stream ended before attach()
  std::optional<std::pair<int, std::string>> early_reply_;
  std::vector<std::shared_ptr<void>> held_;
};

}  // namespace rlcore::serve
