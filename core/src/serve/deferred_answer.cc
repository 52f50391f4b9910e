// DeferredAnswer: the answer of a completion the request driver runs, built
// on the driver's callbacks and sent through a ResponseSink.
#include "serve/deferred_answer.h"

#include "serve/answer.h"
#include "rlcore/error.h"

namespace rlcore::serve {

DeferredAnswer::DeferredAnswer(const char* route, CompletionRequest request, PreparedCompletion prepared,
                               const ServedModel& model, EncoderFactory encoder, BodyBuilder build,
                               std::vector<std::shared_ptr<void>> held)
    : route_(route),
      request_(std::move(request)),
      prepared_(std::move(prepared)),
      build_(std::move(build)),
      held_(std::move(held)) {
  if (encoder) stream_ = std::make_unique<LiveStream>(encoder(request_, prepared_), request_, prepared_, model);
}

RequestDriver::Listener DeferredAnswer::listener() {
  if (stream_) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::string& event : stream_->begin()) send_event(std::move(event));
  }
  auto self = shared_from_this();
  RequestDriver::Listener listener;
  if (stream_) listener.on_token = [self](const RequestDriver::Token& token) { self->on_token(token); };
  listener.on_done = [self](RequestDriver::CallOutput output) { self->on_done(std::move(output)); };
  listener.on_error = [self](const std::string& error) { self->on_error(error); };
  return listener;
}

void DeferredAnswer::attach(std::shared_ptr<ResponseSink> sink, std::function<void()> cancel) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    sink_ = sink;
    for (std::string& event : early_events_) sink_->event(std::move(event));
    early_events_.clear();
    if (early_end_) sink_->end_events();
    if (early_reply_) sink_->reply(early_reply_->first, std::move(early_reply_->second));
  }
  // Outside the lock: a sink whose client has gone runs `cancel` at once, and
  // an abort ends the answer here.
  sink->on_cancel(std::move(cancel));
}

void DeferredAnswer::on_token(const RequestDriver::Token& token) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_) return;  // an abort on another thread ended it first
  send_event(stream_->token(token.sample, token.id, token.logprob, token.top, token.finish));
}

void DeferredAnswer::set_prompt_logprobs(std::vector<std::vector<PositionLogprobs>> scores) {
  prompt_logprobs_ = std::move(scores);
}

void DeferredAnswer::on_done(RequestDriver::CallOutput output) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_) return;
  if (stream_) {
    for (std::string& event : stream_->end()) send_event(std::move(event));
    send_end();
    return;
  }
  ReportedLogprobs reported{std::move(output.top_logprobs), std::move(prompt_logprobs_)};
  const ApiResponse whole = answer(route_, [&] { return ApiResponse{200, build_(output.generation, reported)}; });
  send_reply(whole.status, whole.body);
}

void DeferredAnswer::on_error(const std::string& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ended_) return;
  const ApiResponse failure = answer(route_, [&]() -> ApiResponse { throw Error(error); });
  if (stream_) {
    for (const std::string& event : stream_error_events(failure.body)) send_event(event);
    send_end();
    return;
  }
  send_reply(failure.status, failure.body);
}

void DeferredAnswer::send_event(std::string event) {
  if (sink_) {
    sink_->event(std::move(event));
  } else {
    early_events_.push_back(std::move(event));
  }
}

void DeferredAnswer::send_end() {
  ended_ = true;
  held_.clear();  // the generation is over: /pause and reloads need not wait for the client
  if (sink_) {
    sink_->end_events();
  } else {
    early_end_ = true;
  }
}

void DeferredAnswer::send_reply(int status, std::string body) {
  ended_ = true;
  held_.clear();
  if (sink_) {
    sink_->reply(status, std::move(body));
  } else {
    early_reply_.emplace(status, std::move(body));
  }
}

}  // namespace rlcore::serve
