// RequestDriver: how concurrent HTTP requests of `rlcore serve` share decode
// steps. Prompts are submitted as requests of the engine's GeneratesRequests
// capability; one thread steps the engine while any request is unfinished, so
// requests join and leave one running batch. start() returns at once and
// hands tokens and the answer to callbacks (the event-driven server: no
// thread waits per request); generate() waits for them.
//
// The stepping thread is the only thread that runs the engine's kernels (the
// dev-mode routes' reloads and sleeps run on it too, run_on_stepping_thread):
// libgomp keeps a pool of worker threads for every thread that opens parallel
// regions, and once a process holds more pool workers than cores an idle
// worker sleeps after a few spins, so every parallel region pays a futex wake
// (measured: 14.5K context switches a second, a 100m model's decode step 1.6x
// slower on 2 cores). `rlcore serve` loads the engine on a thread that ends.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rlcore/capabilities.h"
#include "rlcore/inference_engine.h"

namespace rlcore::serve {

class RequestDriver {
 public:
  explicit RequestDriver(GeneratesRequests& engine);
  ~RequestDriver();  // stops stepping; the engine must outlive it
  RequestDriver(const RequestDriver&) = delete;
  RequestDriver& operator=(const RequestDriver&) = delete;

  // A token as it arrives: sample `sample` (prompt-major index) sampled `id`;
  // `finish` is set on the sample's last token.
  struct Token {
    std::size_t sample = 0;
    int32_t id = 0;
    float logprob = 0;
    std::optional<FinishReason> finish;
    TopLogprobs top;  // the most likely tokens where they were asked for (start's top_logprobs)
  };

  // A call's outputs, prompt-major, and with them, where they were asked for,
  // each sampled token's most likely tokens (top_logprobs[sample][token]).
  struct CallOutput {
    GenerationOutput generation;
    std::vector<std::vector<TopLogprobs>> top_logprobs;
  };

  // What start() reports, each on the stepping thread or on the thread that
  // aborts the call: tokens as they arrive (in order within a sample), then
  // exactly one of on_done (every sample finished or aborted) and on_error
  // (stepping the engine failed, or the driver stopped).
  struct Listener {
    std::function<void(const Token&)> on_token;  // may be empty
    std::function<void(CallOutput)> on_done;
    std::function<void(const std::string& error)> on_error;
  };
  // Submits prompts x n requests and returns; throws what submit() throws
  // (ValueError, OverloadedError) with none of them left running, and then
  // calls nothing. `tag` names the call for abort_tag(). `top_logprobs` > 0:
  // every token comes with that many most likely tokens (ValueError when the
  // engine cannot report them: supports_logprobs()).
  void start(const std::vector<std::vector<int32_t>>& prompts, const SamplingParams& sampling, Listener listener,
             const std::string& tag = "", int64_t top_logprobs = 0);

  // Whether the engine reports log-probs beyond the sampled token's (ReportsLogprobs).
  bool supports_logprobs() const { return logprobs_ != nullptr; }
  // ReportsLogprobs::score_tokens on the stepping thread, between two steps;
  // waits for it (never call it from a listener). ValueError without the capability.
  std::vector<PositionLogprobs> score_tokens(const std::vector<int32_t>& ids, int64_t top_logprobs);

  // prompts x n requests (each sample of a seeded call on a stream of its own), waited
  // for; prompt-major, as InferenceEngine::generate. `on_token`, when given,
  // runs on the calling thread for every token as it arrives (in order within
  // a sample); returning false aborts the call's requests (a client that has
  // gone). Throws what submit() throws (ValueError, OverloadedError), with
  // none of the call's requests left running, and Error when stepping the
  // engine failed.
  // `tag` names the call for abort_tag() (the completion's id).
  GenerationOutput generate(const std::vector<std::vector<int32_t>>& prompts, const SamplingParams& sampling,
                            const std::function<bool(const Token&)>& on_token = {}, const std::string& tag = "");

  // Runs `task` on the stepping thread between two steps and waits for it;
  // rethrows what it throws.
  void run_on_stepping_thread(const std::function<void()>& task);

  // vLLM's /pause?mode=keep: no step runs after the one in progress, which
  // freeze() waits for; the requests stay where they are, new ones queue, and
  // run_on_stepping_thread still runs tasks (a weight reload). thaw() steps
  // again; with `recompute_cache` (vLLM's clear_cache) every request in flight
  // first restarts from its tokens so far (an abort, then a resubmission
  // resuming them: its cache is recomputed under the weights loaded meanwhile).
  // thaw() does nothing unless frozen.
  void freeze();
  void thaw(bool recompute_cache);
  bool frozen() const;

  // Ends every request in flight now (finish reason abort): vLLM's /pause?mode=abort.
  void abort_all();
  // Ends the requests of the calls tagged `tag`; returns how many were running or waiting.
  size_t abort_tag(const std::string& tag);

 private:
  struct Call;
  struct Owner {
    std::shared_ptr<Call> call;
    size_t index = 0;           // in the call's outputs
    GenerationRequest request;  // as submitted, for a restart
  };
  void submit(const GenerationRequest& request, int64_t top_logprobs);
  // The most likely tokens that the requests of `deltas` which asked for them
  // recorded, by request id (taken from the engine; mutex_ not held).
  std::map<std::string, std::vector<TopLogprobs>> take_top(const std::vector<TokenDelta>& deltas);
  void run();
  void restart_in_flight();
  void fail_all(const std::string& why);
  void abort_ids(const std::vector<std::string>& ids);
  // Hands `out` to the call that owns its id, if any; returns the call when
  // that was its last output (to be finished once mutex_ is released). mutex_ held.
  std::shared_ptr<Call> deliver_locked(RequestOutput out);
  static void finish(Call& call);

  GeneratesRequests& engine_;
  ReportsLogprobs* logprobs_ = nullptr;  // the engine's, when it has the capability
  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::map<std::string, Owner> owners_;           // request id -> its call, output index and request
  std::deque<std::packaged_task<void()>> tasks_;  // run_on_stepping_thread's, in order
  int64_t next_id_ = 0;
  std::atomic<int64_t> next_call_{0};  // generate()'s tags when it is given none
  bool stop_ = false;
  bool frozen_ = false;
  std::thread thread_;
};

}  // namespace rlcore::serve
