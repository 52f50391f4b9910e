// Private to the core: a step's data metrics under verl's names
// (compute_data_metrics / compute_throughout_metrics in metric_utils.py).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rlcore/batch.h"
#include "rlcore/core/runtime/worker_group.h"
#include "rlcore/generation_request.h"

namespace rlcore::trainer {

using StepMetrics = std::map<std::string, double>;

// From a step's batch: critic/score, critic/rewards, critic/advantages,
// critic/returns, critic/values (with a critic) as mean/max/min,
// response_length/{mean,max,min,clip_ratio}, prompt_length/{mean,max,min}.
// Reads token_level_scores, token_level_rewards, advantages, returns,
// response_mask, attention_mask, and values when present.
StepMetrics data_metrics(const Batch& batch);

// verl's compute_variance_proxy_metrics, when the batch has sum_pi_squared
// (actor.calculate_sum_pi_squared): variance_proxy/{proxy1_signal_strength,
// proxy2_total_power, proxy3_pure_noise, expected_a_squared, expected_w} from
// the score-norm proxy W = sum_t (1 - 2 pi_t + sum_pi_squared_t), scaled by the
// rollout IS weights when the batch has them. `grad_norm`: actor/grad_norm, or
// null (then proxies 1 and 3 are 0). Empty without sum_pi_squared.
StepMetrics variance_proxy_metrics(const Batch& batch, const double* grad_norm);

// perf/total_num_tokens, perf/time_per_step and perf/throughput (tokens per
// second per worker, as verl's per-GPU figure).
StepMetrics throughput_metrics(const Batch& batch, double step_seconds, int64_t workers);

// Adds one rollout (generation batch) to a step's rollout metrics, after
// timing_s/gen has counted it; a step that generates several (DAPO)
// accumulates them: rollout/response_tokens, perf/rollout_tokens_per_s
// (response tokens per second of generation), and where the engine reports
// them (`per_rank`: one per rollout rank, ReportsGenerationStats) the queueing
// line, per rank: rollout/decode_steps, rollout/running_mean (sequences per
// decode step), rollout/running_max, rollout/waiting_max (sequences queued
// behind max_num_seqs), rollout/prefill_rows, rollout/joins.
void add_rollout_metrics(StepMetrics& metrics, const std::vector<GenerationStats>& per_rank, double response_tokens);

// critic/score_extra/<name>: the mean of each grader extra over the rows that have it (NaN: absent).
void add_score_extra_metrics(const std::map<std::string, std::vector<double>>& extras, StepMetrics& metrics);

// From the replies of the actor's sync_weights (one per rank; ranks swap in
// lockstep, so the slowest rank's times and the largest peaks are reported):
// timing_s/reshard_*, perf/swap_*, memory/* and each rank's resident memory.
void add_weight_sync_metrics(const runtime::CallOutput& synced, StepMetrics& metrics);

// The metrics that close a step: the controller's memory, data_metrics,
// variance_proxy_metrics, timing_s/step (since `step_start`) and throughput_metrics.
void add_end_of_step_metrics(const Batch& batch, std::chrono::steady_clock::time_point step_start,
                             int64_t actor_workers, StepMetrics& metrics);

// The asynchronous modes' trainer_idle_ratio: the step's wait for generation over timing_s/step.
void add_trainer_idle_ratio(StepMetrics& metrics);

}  // namespace rlcore::trainer
