// async_training.mode fully_async (docs/async.md): the pool streams groups
// continuously (trainer/streaming_rollout.h); each step trains on the first
// data.train_batch_size groups to finish; every trigger_parameter_sync_step
// steps the actor's weights go to the pool.
#include <algorithm>

#include "rlcore/elapsed_seconds.h"
#include "rlcore/metric_names.h"
#include "trainer/rl_run.h"

namespace rlcore::trainer {

void run_fully_async_loop(RlRun& run, FitSummary& summary) {
  const config::AsyncTrainingConfig& async = run.config.async_training;
  run.sync_pool_before_first_step();
  StreamRequests requests;
  requests.prompts_per_step = run.plan.prompts_per_step;
  requests.n = run.config.actor_rollout_ref.rollout.n;
  requests.sampling = run.train_sampling(run.step);  // its seed unused: a seed per request
  requests.seed = run.config.data.seed * 1000003 + run.step;
  requests.limits = run.limits;
  StreamingRollout stream(*run.rollout_pool, run.train_set, *run.sampler, async, std::move(requests));
  run.streaming = &stream;
  struct Detach {  // checkpoints read the stream's data order only while it runs
    StreamingRollout*& pointer;
    ~Detach() { pointer = nullptr; }
  } detach{run.streaming};
  bool stop = false;
  while (run.step < run.plan.total_steps && !stop) {
    const auto step_start = Clock::now();
    StepMetrics metrics;
    const std::vector<StreamedGroup> groups = stream.take(run.step, metrics);
    const double rollout_idle = metrics[metric_names::kRollouterIdleS];
    metrics.erase(metric_names::kRollouterIdleS);
    ScoredRollout scored;
    scored.rollout = streamed_rollout(groups, run.step, run.limits, metrics);
    const auto reward_start = Clock::now();
    scored.rewards = run.score(scored.rollout);
    metrics["timing_s/reward"] = seconds_since(reward_start);
    metrics = run.train_on(std::move(scored), std::move(metrics), step_start);
    if (run.step % async.trigger_parameter_sync_step == 0 || run.step == run.plan.total_steps) {
      stream.sync(run.step, metrics);
    }
    const double step_seconds = metrics[metric_names::kTimingStep];
    add_trainer_idle_ratio(metrics);
    metrics[metric_names::kRollouterIdleRatio] = step_seconds > 0 ? std::min(1.0, rollout_idle / step_seconds) : 0.0;
    stop = run.finish_step(
        metrics, summary, [&] { stream.quiesce(run.step); }, [&] { stream.resume(); });
  }
}

}  // namespace rlcore::trainer
