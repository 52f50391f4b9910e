// Private to the core: how the rollout's log-probs compare with the trainer's
// old log-probs for the same tokens (docs/exact-logprobs.md).
#pragma once

#include <cstdint>

#include "rlcore/batch.h"
#include "trainer/step_metrics.h"

namespace rlcore::trainer {

// verl's training/rollout_probs_diff_max and _mean (|p_rollout - p_trainer| over
// the response tokens) and rlcore's training/rollout_logprob_mismatches (the
// tokens whose two log-probs differ at all). With `check_exact`, a mismatch
// throws Error naming `step`, the sample (and its prompt uid) and the token.
void add_rollout_probs_diff(const Batch& batch, StepMetrics& metrics, bool check_exact, int64_t step);

}  // namespace rlcore::trainer
