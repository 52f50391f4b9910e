// The fully asynchronous rollout's producer and its hand-over to the trainer
// (see streaming_rollout.h).
#include "trainer/streaming_rollout.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include "rlcore/columns.h"
#include "rlcore/elapsed_seconds.h"
#include "rlcore/metric_names.h"
#include "trainer/rollout_probs.h"
#include "workers/sequences.h"
#include "workers/worker_contract.h"

namespace rlcore::trainer {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kSeedStride = 7919;  // a prime: request seeds far apart from the run's seed

}  // namespace

StreamingRollout::StreamingRollout(RolloutPool& pool, const data::Dataset& data, data::EpochSampler& sampler,
                                   const config::AsyncTrainingConfig& async, StreamRequests requests)
    : pool_(pool), data_(data), sampler_(sampler), async_(async), requests_(std::move(requests)) {
  const double window = static_cast<double>(async_.trigger_parameter_sync_step * requests_.prompts_per_step);
  window_budget_ = static_cast<int64_t>(std::ceil((1.0 + async_.staleness_threshold) * window - 1e-9));
  budget_left_ = window_budget_;
  producer_ = std::thread([this] { produce(); });
}

StreamingRollout::~StreamingRollout() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (producer_.joinable()) producer_.join();
}

bool StreamingRollout::can_submit() const {
  return !stop_ && !draining_ && !hold_ && budget_left_ > 0 &&
         static_cast<int64_t>(in_flight_.size()) < requests_.prompts_per_step;
}

std::vector<Batch> StreamingRollout::new_requests(const std::vector<int64_t>& serving) {
  const runtime::WorkerGroup& group = pool_.workers().group;
  const auto ranks = static_cast<size_t>(group.size());
  std::vector<std::vector<std::vector<int32_t>>> prompts(ranks);
  std::vector<std::vector<int64_t>> ids(ranks);
  std::vector<std::vector<int64_t>> seeds(ranks);
  // A prompt's samples go to one rank, where they share its prefill.
  const auto assign = [&](int64_t prompt, Pending& pending) {
    pending.rank = serving[static_cast<size_t>(next_rank_++) % serving.size()];
    pending.incarnation = group.incarnation(pending.rank);
    const auto rank = static_cast<size_t>(pending.rank);
    for (int64_t j = 0; j < requests_.n; ++j) {
      if (pending.finished[static_cast<size_t>(j)]) continue;
      const int64_t request = prompt * requests_.n + j;
      prompts[rank].push_back(pending.group.example->prompt_ids);
      ids[rank].push_back(request);
      seeds[rank].push_back(requests_.seed * 1000003 + request * kSeedStride);
    }
  };
  for (; !resubmit_.empty(); resubmit_.pop_front()) {
    const auto found = in_flight_.find(resubmit_.front());
    if (found != in_flight_.end()) assign(found->first, found->second);
  }
  while (can_submit()) {
    if (undrawn_.empty()) {
      Draw draw{sampler_.state(), 0};
      const std::vector<int64_t> indices = sampler_.next();
      draw.untaken = static_cast<int64_t>(indices.size());
      draws_[next_draw_++] = draw;
      undrawn_.assign(indices.begin(), indices.end());
    }
    const int64_t prompt = next_prompt_++;
    Pending pending;
    pending.draw = next_draw_ - 1;
    pending.group.example = &data_.at(undrawn_.front());
    pending.finished.assign(static_cast<size_t>(requests_.n), false);
    undrawn_.pop_front();
    assign(prompt, pending);
    in_flight_[prompt] = std::move(pending);
    --budget_left_;
  }
  std::vector<Batch> inputs(ranks);
  for (size_t rank = 0; rank < inputs.size(); ++rank) {
    if (prompts[rank].empty()) continue;
    inputs[rank] = workers::make_prompt_batch(prompts[rank], requests_.limits.pad_token_id);
    inputs[rank].set(workers::kRequestId, at::tensor(ids[rank], at::kLong));
    inputs[rank].set(workers::kRequestSeed, at::tensor(seeds[rank], at::kLong));
  }
  return inputs;
}

void StreamingRollout::reclaim_lost(const std::vector<int64_t>& serving) {
  const runtime::WorkerGroup& group = pool_.workers().group;
  std::map<int64_t, int64_t> incarnation;  // per serving rank, read once per call rather than per prompt
  for (int64_t rank : serving) incarnation[rank] = group.incarnation(rank);
  std::map<int64_t, int64_t> lost_per_rank;
  for (auto& [prompt, pending] : in_flight_) {
    if (pending.rank < 0) continue;  // queued for resubmission
    const auto serves_now = incarnation.find(pending.rank);
    const bool serves = serves_now != incarnation.end() && serves_now->second == pending.incarnation;
    if (serves) continue;
    lost_per_rank[pending.rank] += std::count(pending.finished.begin(), pending.finished.end(), false);
    pending.rank = -1;
    resubmit_.push_back(prompt);
  }
  for (const auto& [rank, requests] : lost_per_rank) {
    spdlog::warn("fully_async: rollout rank {} was lost with {} unfinished request(s); resubmitting them to {}", rank,
                 requests, serving.empty() ? std::string("its replacement") : "the ranks that serve");
    lost_requests_ += requests;
  }
}

void StreamingRollout::collect(const runtime::CallOutput& output) {
  for (const runtime::RankReply& reply : output.replies) {
    for (workers::StreamReply::Finished& done :
         workers::StreamReply::from_reply(reply.batch, workers::reply_of(workers::rollout_methods::kStream, reply))
             .finished) {
      const int64_t prompt = done.id / requests_.n;
      const auto found = in_flight_.find(prompt);
      if (found == in_flight_.end()) continue;  // not ours (cannot happen: ids are unique per run)
      const auto sample = static_cast<size_t>(done.id % requests_.n);
      if (found->second.finished[sample]) continue;  // a resubmitted request's first run (cannot happen)
      found->second.finished[sample] = true;
      found->second.group.samples.push_back(StreamedSample{std::move(done.tokens), done.stopped});
      if (static_cast<int64_t>(found->second.group.samples.size()) < requests_.n) continue;
      ready_.push_back(std::move(found->second.group));
      ready_draws_.push_back(found->second.draw);
      in_flight_.erase(found);
    }
  }
}

void StreamingRollout::park_until(const std::function<bool()>& released, std::unique_lock<std::mutex>& lock) {
  parked_ = true;
  changed_.notify_all();
  changed_.wait(lock, released);
  parked_ = false;
}

void StreamingRollout::produce() {
  std::unique_lock<std::mutex> lock(mutex_);
  try {
    const workers::StreamArgs arguments{
        requests_.sampling,
        {requests_.limits.max_tokens, requests_.limits.stop_token_ids, requests_.limits.pad_token_id},
        async_.decode_steps_per_call};
    while (!stop_) {
      const std::vector<int64_t> serving = pool_.serving();
      no_rank_serves_ = serving.empty();
      const auto parks = [this] { return hold_ || (draining_ && (in_flight_.empty() || no_rank_serves_)); };
      if (parks()) {
        park_until([&] { return stop_ || !parks(); }, lock);
        continue;
      }
      reclaim_lost(serving);
      if (no_rank_serves_) {  // the trainer syncs the replacement (take, sync, quiesce)
        changed_.notify_all();
        changed_.wait_for(lock, std::chrono::milliseconds(100));
        continue;
      }
      if (in_flight_.empty() && !can_submit()) {  // the budget is spent: wait for the next sync
        const auto start = Clock::now();
        changed_.wait(lock, [this] { return stop_ || hold_ || draining_ || can_submit(); });
        idle_seconds_ += seconds_since(start);
        continue;
      }
      const std::vector<Batch> inputs = new_requests(serving);
      const RolloutWorkers workers = pool_.workers();
      lock.unlock();
      runtime::CallOptions only_serving;
      only_serving.ranks = serving;
      const runtime::CallOutput output =
          workers::call_each(workers.group, workers::rollout_methods::kStream, inputs, arguments, only_serving).get();
      lock.lock();
      collect(output);
      changed_.notify_all();
    }
  } catch (...) {
    if (!lock.owns_lock()) lock.lock();
    failure_ = std::current_exception();
    changed_.notify_all();
  }
}

bool StreamingRollout::too_stale(const StreamedGroup& group, int64_t version) const {
  if (async_.max_staleness < 0) return false;
  for (const StreamedSample& sample : group.samples) {
    for (const int64_t sampled_by : sample.tokens.weight_versions) {
      if (version - sampled_by > async_.max_staleness) return true;
    }
  }
  return false;
}

std::vector<StreamedGroup> StreamingRollout::take(int64_t version, StepMetrics& metrics) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto start = Clock::now();
  std::vector<StreamedGroup> groups;
  int64_t dropped_samples = 0;
  while (static_cast<int64_t>(groups.size()) < requests_.prompts_per_step) {
    changed_.wait(lock, [this] { return failure_ || !ready_.empty() || no_rank_serves_; });
    if (failure_) std::rethrow_exception(failure_);
    if (ready_.empty() && no_rank_serves_) {  // nothing can finish until a replacement has the weights
      lock.unlock();
      sync(version, metrics);
      lock.lock();
      continue;
    }
    StreamedGroup group = std::move(ready_.front());
    ready_.pop_front();
    const auto draw = draws_.find(ready_draws_.front());
    ready_draws_.pop_front();
    if (draw != draws_.end() && --draw->second.untaken == 0) draws_.erase(draw);
    if (too_stale(group, version)) {
      dropped_samples += static_cast<int64_t>(group.samples.size());
      ++budget_left_;  // a fresh prompt in its place, or this step would wait for the next sync
      changed_.notify_all();
      continue;
    }
    groups.push_back(std::move(group));
  }
  metrics[metric_names::kTimingWaitPrevGen] = seconds_since(start);
  metrics["async/stale_dropped"] = static_cast<double>(dropped_samples);
  metrics["async/lost_requests"] = static_cast<double>(lost_requests_);
  lost_requests_ = 0;
  metrics[metric_names::kRollouterIdleS] = idle_seconds_;
  idle_seconds_ = 0;
  return groups;
}

void StreamingRollout::sync(int64_t version, StepMetrics& metrics) {
  const bool rejoin = pool_.has_down_ranks();
  std::unique_lock<std::mutex> lock(mutex_);
  // Requests of a lost worker could not finish before the sync: hold them, as partial_rollout does.
  if (async_.partial_rollout || rejoin) {
    hold_ = true;
  } else {
    draining_ = true;
  }
  changed_.notify_all();
  const auto start = Clock::now();
  changed_.wait(lock, [this] { return parked_ || failure_; });
  if (failure_) std::rethrow_exception(failure_);
  metrics["timing_s/wait_rollout_drain"] = seconds_since(start);
  pool_.sync(version, metrics);  // the producer is parked: nothing else calls the pool
  // Prompts started before the sync and not yet trained on count against the new window.
  const auto outstanding = static_cast<int64_t>(in_flight_.size() + ready_.size());
  budget_left_ = std::max<int64_t>(0, window_budget_ - outstanding);
  hold_ = false;
  draining_ = false;
  no_rank_serves_ = false;  // every rank has the weights now
  changed_.notify_all();
}

void StreamingRollout::quiesce(int64_t version) {
  if (pool_.has_down_ranks()) {  // the validation generates on every rank, with one version of the weights
    StepMetrics rejoin;
    sync(version, rejoin);
  }
  std::unique_lock<std::mutex> lock(mutex_);
  draining_ = true;
  changed_.notify_all();
  changed_.wait(lock, [this] { return parked_ || failure_; });
  if (failure_) std::rethrow_exception(failure_);
}

void StreamingRollout::resume() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    draining_ = false;
  }
  changed_.notify_all();
}

data::SamplerState StreamingRollout::checkpoint_state() {
  std::lock_guard<std::mutex> lock(mutex_);
  return draws_.empty() ? sampler_.state() : draws_.begin()->second.before;
}

Rollout streamed_rollout(const std::vector<StreamedGroup>& groups, int64_t step, const GenerationLimits& limits,
                         StepMetrics& metrics) {
  Rollout rollout;
  std::vector<std::vector<int32_t>> prompts;
  workers::MaskedResponses responses;
  std::vector<int64_t> uid;
  std::vector<int64_t> sampled_by;
  double staleness_sum = 0, staleness_max = 0, span_max = 0;
  int64_t partial = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const StreamedSample& sample : groups[g].samples) {
      rollout.examples.push_back(groups[g].example);
      prompts.push_back(groups[g].example->prompt_ids);
      responses.ids.push_back(sample.tokens.token_ids);
      responses.loss_masks.emplace_back(sample.tokens.size(), uint8_t{1});
      responses.logprobs.push_back(sample.tokens.logprobs);
      responses.stopped.push_back(sample.stopped);
      uid.push_back(static_cast<int64_t>(g));
      const auto& versions = sample.tokens.weight_versions;
      if (versions.empty()) {
        sampled_by.push_back(-1);
        continue;
      }
      const auto [oldest, newest] = std::minmax_element(versions.begin(), versions.end());
      sampled_by.push_back(*oldest == *newest ? *oldest : -1);
      const auto staleness = static_cast<double>(step - *oldest);
      staleness_sum += staleness;
      staleness_max = std::max(staleness_max, staleness);
      span_max = std::max(span_max, static_cast<double>(*newest - *oldest));
      partial += *newest != *oldest ? 1 : 0;
    }
  }
  rollout.batch = workers::make_masked_sequence_batch(prompts, responses, limits.max_tokens, limits.pad_token_id);
  rollout.batch.set(columns::kUid, at::tensor(uid, at::kLong));
  rollout.batch.set(kSampledByVersion, at::tensor(sampled_by, at::kLong));
  const auto samples = static_cast<double>(uid.size());
  metrics[metric_names::kAsyncStalenessMean] = staleness_sum / samples;
  metrics[metric_names::kAsyncStalenessMax] = staleness_max;
  metrics[metric_names::kFullyAsyncPartialRatio] = static_cast<double>(partial) / samples;
  metrics[metric_names::kFullyAsyncMaxPartialSpan] = span_max;
  return rollout;
}

}  // namespace rlcore::trainer
