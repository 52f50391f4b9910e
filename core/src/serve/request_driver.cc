// The stepping thread of RequestDriver and the calls waiting on it.
#include "serve/request_driver.h"

#include <chrono>
#include <unordered_map>
#include <optional>

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
  std::string error;  // set when stepping failed
  bool streaming = false;
  std::string tag;
  std::deque<Token> arrived;  // streamed tokens not yet handed to on_token
  std::condition_variable changed;
};

RequestDriver::RequestDriver(GeneratesRequests& engine) : engine_(engine), thread_([this] { run(); }) {}

RequestDriver::~RequestDriver() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  thread_.join();
  fail_all("rlcore serve is shutting down");
}

GenerationOutput RequestDriver::generate(const std::vector<std::vector<int32_t>>& prompts,
                                         const SamplingParams& sampling,
                                         const std::function<bool(const Token&)>& on_token, const std::string& tag) {
  Call call;
  call.tag = tag;
  const size_t count = prompts.size() * static_cast<size_t>(sampling.n);
  call.outputs.resize(count);
  call.remaining = count;
  call.streaming = static_cast<bool>(on_token);
  std::vector<GenerationRequest> requests(count);
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t k = 0; k < count; ++k) {
      GenerationRequest& r = requests[k];
      r.id = "serve-" + std::to_string(next_id_++);
      r.prompt_ids = prompts[k / static_cast<size_t>(sampling.n)];
      r.sampling = sampling;
      r.sampling.n = 1;
      if (sampling.seed >= 0) r.sampling.seed = sample_seed(sampling.seed, k);
      owners_[r.id] = Owner{&call, k, r};
      ids.push_back(r.id);
    }
  }
  size_t submitted = 0;
  try {
    for (; submitted < count; ++submitted) engine_.submit(requests[submitted]);
  } catch (...) {
    for (size_t k = 0; k < submitted; ++k) engine_.abort(requests[k].id);
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::string& id : ids) owners_.erase(id);
    throw;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  work_.notify_all();
  bool listening = call.streaming;
  while (true) {
    call.changed.wait(lock, [&] { return !call.arrived.empty() || call.remaining == 0 || !call.error.empty(); });
    if (!call.error.empty()) throw Error(call.error);
    std::deque<Token> arrived;
    arrived.swap(call.arrived);
    if (listening && !arrived.empty()) {
      lock.unlock();
      for (const Token& token : arrived) {
        if (!on_token(token)) {
          listening = false;  // the listener has gone: stop the rest
          abort_ids(ids);
          break;
        }
      }
      lock.lock();
    }
    if (call.remaining == 0 && call.arrived.empty()) break;
  }

  GenerationOutput out;
  for (std::optional<RequestOutput>& output : call.outputs) {
    for (int64_t version : output->generated.weight_versions)
      out.weight_version = std::max(out.weight_version, version);
    out.token_ids.push_back(std::move(output->generated.token_ids));
    out.logprobs.push_back(std::move(output->generated.logprobs));
    out.finish_reasons.push_back(output->finish_reason);
  }
  return out;
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
  std::vector<GenerationRequest> requests;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, owner] : owners_) requests.push_back(owner.request);
  }
  for (GenerationRequest& request : requests) {
    std::optional<RequestOutput> out = engine_.abort(request.id);
    if (!out) continue;                 // not submitted yet, or aborted by its client meanwhile
    request.sampling.seed = out->seed;  // the stream it drew from, continued
    request.resumed = out->generated;
    try {
      engine_.submit(request);
    } catch (const std::exception&) {
      // Refused now (the engine changed under it): the caller gets what it had, as an abort.
      std::lock_guard<std::mutex> lock(mutex_);
      deliver_locked(std::move(*out));
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
    if (!out) continue;  // finished meanwhile (or never known): the stepping thread delivers it
    std::lock_guard<std::mutex> lock(mutex_);
    deliver_locked(std::move(*out));
  }
}

void RequestDriver::deliver_locked(RequestOutput out) {
  auto owner = owners_.find(out.id);
  if (owner == owners_.end()) return;
  Call* call = owner->second.call;
  const size_t index = owner->second.index;
  owners_.erase(owner);
  call->outputs[index] = std::move(out);
  if (--call->remaining == 0) call->changed.notify_all();
}

void RequestDriver::fail_all(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [id, owner] : owners_) {
    owner.call->error = why;
    owner.call->changed.notify_all();
  }
  owners_.clear();
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
    std::unique_lock<std::mutex> lock(mutex_);
    std::unordered_map<std::string, FinishReason> finishing;
    for (const RequestOutput& finished : out.finished) finishing.emplace(finished.id, finished.finish_reason);
    for (const TokenDelta& delta : out.deltas) {
      auto owner = owners_.find(delta.id);
      if (owner == owners_.end() || !owner->second.call->streaming) continue;
      Call* call = owner->second.call;
      for (size_t t = 0; t < delta.tokens.size(); ++t) {
        Token token{owner->second.index, delta.tokens.token_ids[t], delta.tokens.logprobs[t], std::nullopt};
        auto finish = finishing.find(delta.id);
        if (t + 1 == delta.tokens.size() && finish != finishing.end()) token.finish = finish->second;
        call->arrived.push_back(token);
      }
      call->changed.notify_all();
    }
    for (RequestOutput& finished : out.finished) deliver_locked(std::move(finished));
    // Owners registered but not yet submitted: wait briefly instead of spinning.
    if (out.deltas.empty() && !owners_.empty() && !frozen_) work_.wait_for(lock, std::chrono::milliseconds(1));
  }
}

}  // namespace rlcore::serve
