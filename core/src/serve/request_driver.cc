// The stepping thread of RequestDriver and the calls waiting on it.
#include "serve/request_driver.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <unordered_map>

#include "rlcore/error.h"

namespace rlcore::serve {
namespace {

// Seed of sample k of a call seeded `seed`: a different stream for every
// sample, reproducible, and unrelated to the streams of seed + 1 (a client's
// next call) as seed + k would not be.
int64_t sample_seed(int64_t seed, size_t k) {
  const uint64_t mixed = static_cast<uint64_t>(seed) ^ (static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ULL);
  return static_cast<int64_t>(mixed >> 1);  // non-negative
}

}  // namespace

struct RequestDriver::Call {
  std::vector<std::optional<RequestOutput>> outputs;
  size_t remaining = 0;
  std::string tag;
  Listener listener;
  int64_t top_logprobs = 0;
  std::vector<std::vector<TopLogprobs>> top;  // per output, as taken
};

RequestDriver::RequestDriver(GeneratesRequests& engine)
    : engine_(engine), logprobs_(capability<ReportsLogprobs>(engine)), thread_([this] { run(); }) {}

RequestDriver::~RequestDriver() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  thread_.join();
  fail_all("rlcore serve is shutting down");
}

void RequestDriver::start(const std::vector<std::vector<int32_t>>& prompts, const SamplingParams& sampling,
                          Listener listener, const std::string& tag, int64_t top_logprobs) {
  if (top_logprobs > 0 && !logprobs_) {
    throw ValueError("this engine reports only the sampled token's log-prob, not the most likely tokens");
  }
  auto call = std::make_shared<Call>();
  call->tag = tag;
  call->listener = std::move(listener);
  call->top_logprobs = std::max<int64_t>(top_logprobs, 0);
  const size_t count = prompts.size() * static_cast<size_t>(sampling.n);
  call->outputs.resize(count);
  if (call->top_logprobs > 0) call->top.resize(count);
  call->remaining = count;
  std::vector<GenerationRequest> requests(count);
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) throw Error("rlcore serve is shutting down");
    for (size_t k = 0; k < count; ++k) {
      GenerationRequest& r = requests[k];
      r.id = "serve-" + std::to_string(next_id_++);
      r.prompt_ids = prompts[k / static_cast<size_t>(sampling.n)];
      r.sampling = sampling;
      r.sampling.n = 1;
      if (sampling.seed >= 0) r.sampling.seed = sample_seed(sampling.seed, k);
      owners_[r.id] = Owner{call, k, r};
      ids.push_back(r.id);
    }
  }
  size_t submitted = 0;
  try {
    for (; submitted < count; ++submitted) submit(requests[submitted], call->top_logprobs);
  } catch (...) {
    for (size_t k = 0; k < submitted; ++k) engine_.abort(requests[k].id);
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::string& id : ids) owners_.erase(id);
    throw;
  }
  work_.notify_all();
}

void RequestDriver::submit(const GenerationRequest& request, int64_t top_logprobs) {
  if (top_logprobs > 0) {
    logprobs_->submit_with_top_logprobs(request, top_logprobs);
  } else {
    engine_.submit(request);
  }
}

std::vector<PositionLogprobs> RequestDriver::score_tokens(const std::vector<int32_t>& ids, int64_t top_logprobs) {
  if (!logprobs_) throw ValueError("this engine reports only the sampled token's log-prob, not a prompt's");
  std::vector<PositionLogprobs> scores;
  run_on_stepping_thread([&] { scores = logprobs_->score_tokens(ids, top_logprobs); });
  return scores;
}

GenerationOutput RequestDriver::generate(const std::vector<std::vector<int32_t>>& prompts,
                                         const SamplingParams& sampling,
                                         const std::function<bool(const Token&)>& on_token, const std::string& tag) {
  // The callbacks queue what arrives; this thread hands it on, so on_token runs here.
  struct Waiting {
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<Token> arrived;
    std::optional<GenerationOutput> output;
    std::optional<std::string> error;
  };
  auto waiting = std::make_shared<Waiting>();
  Listener listener;
  if (on_token) {
    listener.on_token = [waiting](const Token& token) {
      std::lock_guard<std::mutex> lock(waiting->mutex);
      waiting->arrived.push_back(token);
      waiting->changed.notify_all();
    };
  }
  listener.on_done = [waiting](CallOutput output) {
    std::lock_guard<std::mutex> lock(waiting->mutex);
    waiting->output = std::move(output.generation);
    waiting->changed.notify_all();
  };
  listener.on_error = [waiting](const std::string& error) {
    std::lock_guard<std::mutex> lock(waiting->mutex);
    waiting->error = error;
    waiting->changed.notify_all();
  };
  const std::string call_tag = tag.empty() ? "call-" + std::to_string(next_call_++) : tag;
  start(prompts, sampling, std::move(listener), call_tag);
  std::unique_lock<std::mutex> lock(waiting->mutex);
  bool listening = static_cast<bool>(on_token);
  while (true) {
    waiting->changed.wait(lock, [&] { return !waiting->arrived.empty() || waiting->output || waiting->error; });
    if (waiting->error) throw Error(*waiting->error);
    std::deque<Token> arrived;
    arrived.swap(waiting->arrived);
    if (listening && !arrived.empty()) {
      lock.unlock();
      for (const Token& token : arrived) {
        if (!on_token(token)) {
          listening = false;  // the listener has gone: stop the rest
          abort_tag(call_tag);
          break;
        }
      }
      lock.lock();
    }
    if (waiting->output && waiting->arrived.empty()) return std::move(*waiting->output);
  }
}

void RequestDriver::run_on_stepping_thread(const std::function<void()>& task) {
  std::future<void> done;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) throw Error("rlcore serve is shutting down");
    tasks_.emplace_back(task);
    done = tasks_.back().get_future();
  }
  work_.notify_all();
  try {
    done.get();
  } catch (const std::future_error&) {  // the driver stopped before the task ran
    throw Error("rlcore serve is shutting down");
  }
}

void RequestDriver::freeze() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    frozen_ = true;
  }
  run_on_stepping_thread([] {});  // returns once the step in progress has ended
}

void RequestDriver::thaw(bool recompute_cache) {
  if (!frozen()) return;
  if (recompute_cache) run_on_stepping_thread([this] { restart_in_flight(); });
  {
    std::lock_guard<std::mutex> lock(mutex_);
    frozen_ = false;
  }
  work_.notify_all();
}

bool RequestDriver::frozen() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return frozen_;
}

void RequestDriver::restart_in_flight() {
  std::vector<std::pair<GenerationRequest, int64_t>> requests;  // and its top log-probs
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, owner] : owners_) requests.emplace_back(owner.request, owner.call->top_logprobs);
  }
  for (auto& [request, top_logprobs] : requests) {
    std::optional<RequestOutput> out = engine_.abort(request.id);
    if (!out) continue;                 // not submitted yet, or aborted by its client meanwhile
    request.sampling.seed = out->seed;  // the stream it drew from, continued
    request.resumed = out->generated;
    try {
      submit(request, top_logprobs);
    } catch (const std::exception&) {
      // Refused now (the engine changed under it): the caller gets what it had, as an abort.
      std::shared_ptr<Call> done;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        done = deliver_locked(std::move(*out));
      }
      if (done) finish(*done);
    }
  }
}

void RequestDriver::abort_all() {
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, owner] : owners_) ids.push_back(id);
  }
  abort_ids(ids);
}

size_t RequestDriver::abort_tag(const std::string& tag) {
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, owner] : owners_) {
      if (owner.call->tag == tag) ids.push_back(id);
    }
  }
  abort_ids(ids);
  return ids.size();
}

void RequestDriver::abort_ids(const std::vector<std::string>& ids) {
  for (const std::string& id : ids) {
    std::optional<RequestOutput> out = engine_.abort(id);
    if (!out) continue;            // finished meanwhile (or never known): the stepping thread delivers it
    std::vector<TopLogprobs> top;  // of the tokens sampled since the last step's delivery
    if (logprobs_) top = logprobs_->take_top_logprobs(id);
    std::shared_ptr<Call> done;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto owner = owners_.find(id); owner != owners_.end() && owner->second.call->top_logprobs > 0) {
        auto& kept = owner->second.call->top[owner->second.index];
        for (TopLogprobs& entry : top) kept.push_back(std::move(entry));
      }
      done = deliver_locked(std::move(*out));
    }
    if (done) finish(*done);
  }
}

std::shared_ptr<RequestDriver::Call> RequestDriver::deliver_locked(RequestOutput out) {
  auto owner = owners_.find(out.id);
  if (owner == owners_.end()) return nullptr;
  std::shared_ptr<Call> call = std::move(owner->second.call);
  const size_t index = owner->second.index;
  owners_.erase(owner);
  call->outputs[index] = std::move(out);
  return --call->remaining == 0 ? call : nullptr;
}

void RequestDriver::finish(Call& call) {
  CallOutput out;
  GenerationOutput& generation = out.generation;
  for (std::optional<RequestOutput>& output : call.outputs) {
    for (int64_t version : output->generated.weight_versions)
      generation.weight_version = std::max(generation.weight_version, version);
    generation.token_ids.push_back(std::move(output->generated.token_ids));
    generation.logprobs.push_back(std::move(output->generated.logprobs));
    generation.finish_reasons.push_back(output->finish_reason);
  }
  out.top_logprobs = std::move(call.top);
  call.listener.on_done(std::move(out));
}

std::map<std::string, std::vector<TopLogprobs>> RequestDriver::take_top(const std::vector<TokenDelta>& deltas) {
  std::map<std::string, std::vector<TopLogprobs>> taken;
  if (!logprobs_) return taken;
  std::vector<std::string> asking;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const TokenDelta& delta : deltas) {
      auto owner = owners_.find(delta.id);
      if (owner != owners_.end() && owner->second.call->top_logprobs > 0) asking.push_back(delta.id);
    }
  }
  for (const std::string& id : asking) taken[id] = logprobs_->take_top_logprobs(id);
  return taken;
}

void RequestDriver::fail_all(const std::string& why) {
  std::vector<std::shared_ptr<Call>> failed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [id, owner] : owners_) {
      if (std::find(failed.begin(), failed.end(), owner.call) == failed.end()) failed.push_back(owner.call);
    }
    owners_.clear();
  }
  for (const auto& call : failed) call->listener.on_error(why);
}

void RequestDriver::run() {
  while (true) {
    std::packaged_task<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock, [&] { return stop_ || !tasks_.empty() || (!frozen_ && !owners_.empty()); });
      if (stop_) return;
      if (!tasks_.empty()) {
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
    }
    if (task.valid()) {
      task();  // what it throws reaches its caller through the future
      continue;
    }
    StepOutput out;
    try {
      out = engine_.step();
    } catch (const std::exception& e) {
      fail_all(std::string("generation failed: ") + e.what());
      continue;
    }
    std::map<std::string, std::vector<TopLogprobs>> top = take_top(out.deltas);
    std::vector<std::pair<std::shared_ptr<Call>, Token>> arrived;
    std::vector<std::shared_ptr<Call>> done;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      std::unordered_map<std::string, FinishReason> finishing;
      for (const RequestOutput& finished : out.finished) finishing.emplace(finished.id, finished.finish_reason);
      for (const TokenDelta& delta : out.deltas) {
        auto owner = owners_.find(delta.id);
        if (owner == owners_.end()) continue;
        Call& call = *owner->second.call;
        const size_t index = owner->second.index;
        std::vector<TopLogprobs>* taken = nullptr;
        if (auto it = top.find(delta.id); it != top.end() && it->second.size() == delta.tokens.size()) {
          taken = &it->second;
        }
        for (size_t t = 0; t < delta.tokens.size(); ++t) {
          if (!call.listener.on_token) break;
          Token token{index, delta.tokens.token_ids[t], delta.tokens.logprobs[t], std::nullopt, {}};
          if (taken) token.top = (*taken)[t];
          auto finish = finishing.find(delta.id);
          if (t + 1 == delta.tokens.size() && finish != finishing.end()) token.finish = finish->second;
          arrived.emplace_back(owner->second.call, std::move(token));
        }
        if (taken) {
          for (TopLogprobs& entry : *taken) call.top[index].push_back(std::move(entry));
        }
      }
      for (RequestOutput& finished : out.finished) {
        if (auto call = deliver_locked(std::move(finished))) done.push_back(std::move(call));
      }
      // Owners registered but not yet submitted: wait briefly instead of spinning.
      if (out.deltas.empty() && !owners_.empty() && !frozen_) work_.wait_for(lock, std::chrono::milliseconds(1));
    }
    // Outside the lock: a listener may start or abort calls.
    for (const auto& [call, token] : arrived) call->listener.on_token(token);
    for (const auto& call : done) finish(*call);
  }
}

}  // namespace rlcore::serve
