// NativeEngine's GeneratesRequests: requests through the engine's Scheduler.
#include <memory>
#include <utility>

#include "native_engine.h"
#include "request_checks.h"
#include "rlcore/error.h"

namespace rlcore::infer_native {

RequestOutput NativeEngine::take_output(Sequence& seq) {
  RequestOutput out;
  out.id = seq.id;
  out.generated = std::move(seq.generated);
  out.finish_reason = seq.finish_reason;
  out.prompt_tokens = seq.prompt_tokens;
  out.seed = static_cast<int64_t>(seq.seed);
  if (seq.top_logprobs > 0) {
    if (finished_top_.insert_or_assign(seq.id, std::move(seq.top)).second) finished_top_order_.push_back(seq.id);
    while (finished_top_order_.size() > kFinishedTopKept) {
      finished_top_.erase(finished_top_order_.front());
      finished_top_order_.pop_front();
    }
  }
  return out;
}

void NativeEngine::submit(GenerationRequest request) {
  std::lock_guard<FifoMutex> lock(mutex_);
  submit_locked(std::move(request), 0);
}

void NativeEngine::submit_locked(GenerationRequest request, int64_t top_logprobs) {
  check_ready("submit()");
  if (tp_group_) {
    throw ValueError("infer-native: request-level generation with tensor_model_parallel_size " +
                     std::to_string(tp_size()) + " is not supported; use the collective generate()");
  }
  check_request(request, model_->config().vocab_size, max_model_len_);
  if (requests_->contains(request.id)) {
    throw ValueError("request '" + request.id + "': a request with this id is already waiting or running");
  }
  if (requests_->waiting() >= options_.max_waiting_requests) {
    throw OverloadedError("request '" + request.id + "': " + std::to_string(requests_->waiting()) +
                          " requests are already waiting (infer-native max_waiting_requests " +
                          std::to_string(options_.max_waiting_requests) + "); retry later");
  }
  const auto prompt_tokens = static_cast<int64_t>(request.prompt_ids.size());
  std::vector<int32_t> prefill = std::move(request.prompt_ids);
  prefill.insert(prefill.end(), request.resumed.token_ids.begin(), request.resumed.token_ids.end());
  const int64_t limit = request.sampling.max_tokens;
  const uint64_t seed = request_seed(request.sampling.seed);
  auto seq = std::make_unique<Sequence>(std::move(request.id),
                                        std::make_shared<const std::vector<int32_t>>(std::move(prefill)),
                                        std::move(request.sampling), limit, seed, /*stream=*/0);
  seq->prompt_tokens = prompt_tokens;
  // The resumed tokens took one draw each from the stream this one continues.
  if (!is_greedy(seq->sampling)) {
    for (size_t i = 0; i < request.resumed.size(); ++i) seq->rng.uniform();
  }
  seq->generated = std::move(request.resumed);
  seq->top_logprobs = top_logprobs;
  finished_top_.erase(seq->id);  // an earlier request's of the same id, never taken
  requests_->add(std::move(seq));
}

StepOutput NativeEngine::step() {
  std::lock_guard<FifoMutex> lock(mutex_);
  StepOutput out;
  if (requests_->idle()) return out;
  check_ready("step()");
  Scheduler::Step step = requests_->step(version_);
  for (const Sequence* seq : step.advanced) {
    TokenDelta delta;
    delta.id = seq->id;
    delta.tokens.token_ids.push_back(seq->generated.token_ids.back());
    delta.tokens.logprobs.push_back(seq->generated.logprobs.back());
    delta.tokens.weight_versions.push_back(seq->generated.weight_versions.back());
    out.deltas.push_back(std::move(delta));
  }
  for (auto& seq : step.finished) out.finished.push_back(take_output(*seq));
  return out;
}

std::optional<RequestOutput> NativeEngine::abort(const std::string& id) {
  std::lock_guard<FifoMutex> lock(mutex_);
  std::unique_ptr<Sequence> seq = requests_->remove(id);
  if (!seq) return std::nullopt;
  seq->finish_reason = FinishReason::kAbort;
  return take_output(*seq);
}

GenerationLoad NativeEngine::load() const {
  std::lock_guard<FifoMutex> lock(mutex_);
  GenerationLoad load;
  load.running = requests_->running();
  load.waiting = requests_->waiting();
  load.free_slots = options_.max_num_seqs - load.running;
  load.max_waiting = options_.max_waiting_requests;
  load.kv_tokens = requests_->kv_slots();
  return load;
}

DecodeStats NativeEngine::take_request_stats() {
  std::lock_guard<FifoMutex> lock(mutex_);
  return requests_->take_stats();
}

}  // namespace rlcore::infer_native
