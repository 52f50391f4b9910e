// async_training.mode sync (verl's RayPPOTrainer.fit): each step generates on
// the colocated hybrid engine, scores, trains, and hands the rollout the new weights.
#include "rlcore/error.h"
#include "trainer/dynamic_sampling.h"
#include "trainer/rl_run.h"

namespace rlcore::trainer {
namespace {

// DAPO: drops the groups whose responses all have the same filter metric and
// generates from further prompts until a step's worth of groups remains.
ScoredRollout keep_informative_groups(RlRun& run, ScoredRollout first, StepMetrics& metrics) {
  const config::FilterGroupsConfig& filter = run.config.algorithm.filter_groups;
  const int64_t prompts_per_step = run.plan.prompts_per_step;
  std::vector<ScoredRollout> parts;
  int64_t groups = 0;
  int64_t batches = 0;
  auto add = [&](const ScoredRollout& scored) {
    ++batches;
    const std::vector<int64_t> rows = rows_of_informative_groups(scored.rollout.batch.tensor(columns::kUid),
                                                                 filter_metric(scored.rewards, filter.metric));
    if (rows.empty()) return;
    parts.push_back(select_rows(scored, rows));
    groups += count_groups(parts.back().rollout.batch.tensor(columns::kUid));
  };
  add(first);
  while (groups < prompts_per_step) {
    if (filter.max_num_gen_batches > 0 && batches >= filter.max_num_gen_batches) {
      throw ValueError(
          "step " + std::to_string(run.step + 1) + ": after " + std::to_string(batches) + " generation batches only " +
          std::to_string(groups) + " of " + std::to_string(prompts_per_step) +
          " prompts have responses that differ in '" + filter.metric +
          "' (algorithm.filter_groups.max_num_gen_batches = " + std::to_string(filter.max_num_gen_batches) +
          "); the data may be too hard or too easy for the model, or set it to 0 for no limit");
    }
    // With no bound (max_num_gen_batches <= 0) a data set without one informative group would
    // loop forever: a whole epoch of prompts without any is an error too.
    if (groups == 0 && batches * prompts_per_step >= run.train_set.size()) {
      throw ValueError("step " + std::to_string(run.step + 1) + ": a whole epoch of prompts (" +
                       std::to_string(batches) + " generation batches) gave no group whose responses differ in '" +
                       filter.metric + "' (algorithm.filter_groups); every response scores the same");
    }
    add(run.generate_and_score(run.sampler->next(), batches, run.step, metrics));
  }
  metrics["train/num_gen_batches"] = static_cast<double>(batches);
  return concat_groups(parts, prompts_per_step, run.limits.pad_token_id);
}

StepMetrics sync_step(RlRun& run, const std::vector<int64_t>& indices) {
  StepMetrics metrics;
  const auto step_start = Clock::now();
  ScoredRollout scored = run.generate_and_score(indices, /*gen_batch=*/0, run.step, metrics);
  if (run.config.algorithm.filter_groups.enable) scored = keep_informative_groups(run, std::move(scored), metrics);
  return run.train_on(std::move(scored), std::move(metrics), step_start);
}

}  // namespace

void run_sync_loop(RlRun& run, FitSummary& summary) {
  bool stop = false;
  while (run.step < run.plan.total_steps && !stop) {
    StepMetrics metrics = sync_step(run, run.sampler->next());
    stop = run.finish_step(
        metrics, summary, [] {}, [] {});
  }
}

}  // namespace rlcore::trainer
