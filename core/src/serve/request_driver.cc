// The stepping thread of RequestDriver and the calls waiting on it.
#include "serve/request_driver.h"

#include <chrono>
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
  std::condition_variable done;
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
                                         const SamplingParams& sampling) {
  Call call;
  const size_t count = prompts.size() * static_cast<size_t>(sampling.n);
  call.outputs.resize(count);
  call.remaining = count;
  std::vector<GenerationRequest> requests(count);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t k = 0; k < count; ++k) {
      GenerationRequest& r = requests[k];
      r.id = "serve-" + std::to_string(next_id_++);
      r.prompt_ids = prompts[k / static_cast<size_t>(sampling.n)];
      r.sampling = sampling;
      r.sampling.n = 1;
      if (sampling.seed >= 0) r.sampling.seed = sample_seed(sampling.seed, k);
      owners_[r.id] = {&call, k};
    }
  }
  size_t submitted = 0;
  try {
    for (; submitted < count; ++submitted) engine_.submit(requests[submitted]);
  } catch (...) {
    for (size_t k = 0; k < submitted; ++k) engine_.abort(requests[k].id);
    std::lock_guard<std::mutex> lock(mutex_);
    for (const GenerationRequest& r : requests) owners_.erase(r.id);
    throw;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  work_.notify_all();
  call.done.wait(lock, [&] { return call.remaining == 0 || !call.error.empty(); });
  if (!call.error.empty()) throw Error(call.error);

  GenerationOutput out;
  for (std::optional<RequestOutput>& output : call.outputs) {
    for (int64_t version : output->generated.weight_versions) out.weight_version = std::max(out.weight_version, version);
    out.token_ids.push_back(std::move(output->generated.token_ids));
    out.logprobs.push_back(std::move(output->generated.logprobs));
    out.finish_reasons.push_back(output->finish_reason);
  }
  return out;
}

void RequestDriver::abort_all() {
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [id, owner] : owners_) ids.push_back(id);
  }
  for (const std::string& id : ids) {
    std::optional<RequestOutput> out = engine_.abort(id);
    if (!out) continue;  // finished meanwhile: the stepping thread delivers it
    std::lock_guard<std::mutex> lock(mutex_);
    auto owner = owners_.find(id);
    if (owner == owners_.end()) continue;
    auto [call, index] = owner->second;
    call->outputs[index] = std::move(*out);
    owners_.erase(owner);
    if (--call->remaining == 0) call->done.notify_all();
  }
}

void RequestDriver::fail_all(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [id, owner] : owners_) {
    owner.first->error = why;
    owner.first->done.notify_all();
  }
  owners_.clear();
}

void RequestDriver::run() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock, [&] { return stop_ || !owners_.empty(); });
      if (stop_) return;
    }
    StepOutput out;
    try {
      out = engine_.step();
    } catch (const std::exception& e) {
      fail_all(std::string("generation failed: ") + e.what());
      continue;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    for (RequestOutput& finished : out.finished) {
      auto owner = owners_.find(finished.id);
      if (owner == owners_.end()) continue;
      auto [call, index] = owner->second;
      call->outputs[index] = std::move(finished);
      owners_.erase(owner);
      if (--call->remaining == 0) call->done.notify_all();
    }
    // Owners registered but not yet submitted: wait briefly instead of spinning.
    if (out.deltas.empty() && !owners_.empty()) work_.wait_for(lock, std::chrono::milliseconds(1));
  }
}

}  // namespace rlcore::serve
