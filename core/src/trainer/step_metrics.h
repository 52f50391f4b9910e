// Private to the core: a step's data metrics under verl's names
// (compute_data_metrics / compute_throughout_metrics in metric_utils.py).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "rlcore/batch.h"

namespace rlcore::trainer {

using StepMetrics = std::map<std::string, double>;

// From a step's batch: critic/score, critic/rewards, critic/advantages,
// critic/returns, critic/values (with a critic) as mean/max/min,
// response_length/{mean,max,min,clip_ratio}, prompt_length/{mean,max,min}.
// Reads token_level_scores, token_level_rewards, advantages, returns,
// response_mask, attention_mask, and values when present.
StepMetrics data_metrics(const Batch& batch);

// perf/total_num_tokens, perf/time_per_step and perf/throughput (tokens per
// second per worker, as verl's per-GPU figure).
StepMetrics throughput_metrics(const Batch& batch, double step_seconds, int64_t workers);

}  // namespace rlcore::trainer
