// Private to the core: the fully asynchronous rollout (async_training.mode:
// fully_async; docs/async.md). A producer thread keeps the standalone rollout
// pool generating request by request (rollout.stream): it draws prompts, sends
// each prompt's n requests to one pool rank, and collects the samples that
// finish into groups; a finished group waits in a queue for the trainer.
//
// Staleness is bounded as in verl: after each weight sync the producer may
// start at most ceil((1 + staleness_threshold) x trigger_parameter_sync_step x
// prompts per step) prompts, less those started before the sync and not yet
// trained on. A sync either reaches the requests in flight at once, their
// later tokens sampled by the new weights (partial_rollout), or waits until
// they finish under the old ones. Every token keeps the version that sampled it.
//
// A rollout worker lost with async_training.on_rollout_failure: restart: the
// producer goes on with the other ranks and resubmits the lost worker's
// unfinished requests to them (same ids and seeds; async/lost_requests); its
// replacement serves from the next sync on (RolloutPool::sync). With no rank
// left, the trainer syncs as soon as the replacement is up.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/core/config/async_training_config.h"
#include "rlcore/core/data/dataset.h"
#include "rlcore/core/data/sampler.h"
#include "rlcore/generation_request.h"
#include "trainer/generation.h"
#include "trainer/rollout_pool.h"
#include "trainer/step_metrics.h"

namespace rlcore::trainer {

// What the requests are, beside the schedule async_training sets: the
// step's prompts, samples per prompt and how they are sampled.
struct StreamRequests {
  int64_t prompts_per_step = 1;
  int64_t n = 1;               // samples per prompt (rollout.n)
  workers::Sampling sampling;  // temperature, top_k, top_p (the seeds are per request)
  int64_t seed = 0;            // the requests' seeds derive from it
  GenerationLimits limits;
};

// One sample as it finished: its tokens with their log-probs and versions.
struct StreamedSample {
  GeneratedTokens tokens;
  bool stopped = false;
};

// A prompt and its n samples.
struct StreamedGroup {
  const data::Example* example = nullptr;
  std::vector<StreamedSample> samples;
};

class StreamingRollout {
 public:
  // Starts producing with the weights the pool has, on the schedule of
  // `async` (trigger_parameter_sync_step, staleness_threshold, partial_rollout,
  // decode_steps_per_call, max_staleness).
  StreamingRollout(RolloutPool& pool, const data::Dataset& data, data::EpochSampler& sampler,
                   const config::AsyncTrainingConfig& async, StreamRequests requests);
  // Stops the producer (requests in flight are left to the pool's shutdown).
  ~StreamingRollout();
  StreamingRollout(const StreamingRollout&) = delete;
  StreamingRollout& operator=(const StreamingRollout&) = delete;

  // The next step's prompts_per_step groups, in the order they finished, for
  // a step training from weights `version`. Groups staler than max_staleness
  // are dropped and their budget returned (the producer starts others). Blocks
  // until enough are there; rethrows the producer's failure. Adds
  // timing_s/wait_prev_gen, async/stale_dropped (samples) and rollouter/idle_s
  // (the producer's idle time since the last take) to `metrics`.
  std::vector<StreamedGroup> take(int64_t version, StepMetrics& metrics);

  // The actor's weights as `version` to the pool (see above), and a new
  // staleness budget. Adds the transfer's metrics.
  void sync(int64_t version, StepMetrics& metrics);

  // Lets the requests in flight finish and holds the producer, for a
  // validation on the pool (after syncing `version`, the actor's, to a
  // replacement that has no weights yet); resume() lets it go on.
  void quiesce(int64_t version);
  void resume();

  // The sampler as it was before the oldest prompt not yet taken was drawn.
  data::SamplerState checkpoint_state();

 private:
  struct Draw {  // a batch of prompts drawn from the sampler
    data::SamplerState before;
    int64_t untaken = 0;
  };
  struct Pending {  // a prompt whose samples are in flight
    int64_t draw = 0;
    StreamedGroup group;
    std::vector<bool> finished;  // per sample
    int64_t rank = -1;           // the pool rank generating it
    int64_t incarnation = 0;     // of that rank's worker
  };

  void produce();
  bool can_submit() const;
  bool too_stale(const StreamedGroup& group, int64_t version) const;
  // Under the lock: the requests to resubmit and the prompts the budget allows, per pool rank.
  std::vector<Batch> new_requests(const std::vector<int64_t>& serving);
  // Under the lock: the unfinished requests of prompts whose rank's worker was lost, to resubmit.
  void reclaim_lost(const std::vector<int64_t>& serving);
  void collect(const runtime::CallOutput& output);
  void park_until(const std::function<bool()>& released, std::unique_lock<std::mutex>& lock);

  RolloutPool& pool_;
  const data::Dataset& data_;
  data::EpochSampler& sampler_;
  config::AsyncTrainingConfig async_;
  StreamRequests requests_;
  int64_t window_budget_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int64_t, Pending> in_flight_;  // prompt id -> its samples so far
  std::deque<StreamedGroup> ready_;       // finished groups, oldest first
  std::deque<int64_t> ready_draws_;       // the draw of each ready group
  std::deque<int64_t> undrawn_;           // indices of the current draw not yet started
  std::deque<int64_t> resubmit_;          // prompts whose unfinished requests a lost worker had
  int64_t lost_requests_ = 0;             // since the last take
  bool no_rank_serves_ = false;           // every rank is lost or waits for the weights
  std::map<int64_t, Draw> draws_;         // draw id -> draw, while any of its prompts is untaken
  int64_t next_draw_ = 0;
  int64_t next_prompt_ = 0;
  int64_t next_rank_ = 0;
  int64_t budget_left_ = 0;  // prompts the producer may still start before the next sync
  bool draining_ = false;    // start nothing; park when nothing is in flight
  bool hold_ = false;        // park at the next call boundary
  bool parked_ = false;
  bool stop_ = false;
  double idle_seconds_ = 0;  // since the last take
  std::exception_ptr failure_;
  std::thread producer_;
};

// A step's groups as a rollout: prompt-major rows, uid per group. Adds the
// staleness of each sample (`step`, the version the step trains from, less the
// oldest version among its tokens) as async/staleness/{mean,max}, and verl's
// fully_async/partial/{partial_ratio,max_partial_span} (samples whose tokens
// span several versions, the widest span).
Rollout streamed_rollout(const std::vector<StreamedGroup>& groups, int64_t step, const GenerationLimits& limits,
                         StepMetrics& metrics);

}  // namespace rlcore::trainer
