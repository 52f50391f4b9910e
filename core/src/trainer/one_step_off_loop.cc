// async_training.mode one_step_off (docs/async.md): the rollout pool generates
// the next step's batch while the actor trains on the one before.
#include <algorithm>
#include <future>
#include <optional>

#include "rlcore/elapsed_seconds.h"
#include "rlcore/metric_names.h"
#include "trainer/rl_run.h"
#include "trainer/rollout_probs.h"

namespace rlcore::trainer {
namespace {

// A batch generated and scored in the background while the actor trains on the one before.
struct BackgroundRollout {
  ScoredRollout scored;
  StepMetrics metrics;         // timing_s/gen, timing_s/reward, rollout/*
  int64_t weight_version = 0;  // the rollout pool's weights when it was generated
  Clock::time_point finished;
};

// Draws the batch for step `for_step` and generates and scores it on the
// rollout pool in the background, with the weights the pool has now.
std::future<BackgroundRollout> launch_rollout(RlRun& run, int64_t for_step) {
  run.sampler_before_pending = run.sampler->state();
  const std::vector<int64_t> indices = run.sampler->next();
  const int64_t version = run.rollout_pool->version();
  return std::async(std::launch::async, [&run, indices, for_step, version] {
    BackgroundRollout done;
    done.scored = run.generate_and_score(indices, /*gen_batch=*/0, for_step, done.metrics);
    done.weight_version = version;
    done.finished = Clock::now();
    return done;
  });
}

}  // namespace

// Step s trains on the batch generated while step s - 1 trained, by the
// weights before that update (staleness 1; 0 for the first step). Each step:
// wait for that batch, sync the pool to the actor's weights, start the next batch, train.
void run_one_step_off_loop(RlRun& run, FitSummary& summary) {
  run.sync_pool_before_first_step();
  std::optional<std::future<BackgroundRollout>> pending = launch_rollout(run, run.step);
  bool stop = false;
  while (run.step < run.plan.total_steps && !stop) {
    const auto step_start = Clock::now();
    StepMetrics metrics;
    BackgroundRollout ready = pending->get();
    pending.reset();
    run.sampler_before_pending.reset();
    metrics[metric_names::kTimingWaitPrevGen] = seconds_since(step_start);
    metrics.insert(ready.metrics.begin(), ready.metrics.end());
    const auto staleness = static_cast<double>(run.step - ready.weight_version);
    metrics[metric_names::kAsyncStalenessMean] = staleness;
    metrics[metric_names::kAsyncStalenessMax] = staleness;
    metrics["async/weight_version"] = static_cast<double>(ready.weight_version);
    Batch& generated = ready.scored.rollout.batch;
    generated.set(kSampledByVersion, at::full({generated.size()}, ready.weight_version, at::kLong));
    run.rollout_pool->sync(run.step, metrics);
    if (run.step + 1 < run.plan.total_steps) pending = launch_rollout(run, run.step + 1);
    const auto rollout_idle_until = Clock::now();
    metrics = run.train_on(std::move(ready.scored), std::move(metrics), step_start);
    const double step_seconds = metrics[metric_names::kTimingStep];
    const double rollout_idle = std::chrono::duration<double>((pending ? rollout_idle_until : Clock::now()) -
                                                              std::max(ready.finished, step_start))
                                    .count();
    add_trainer_idle_ratio(metrics);
    metrics[metric_names::kRollouterIdleRatio] = step_seconds > 0 ? std::max(0.0, rollout_idle) / step_seconds : 0.0;
    stop = run.finish_step(
        metrics, summary,
        [&] {
          if (pending) pending->wait();
        },
        [] {});
  }
  if (pending) pending->wait();  // no generation left running when the workers shut down
}

}  // namespace rlcore::trainer
