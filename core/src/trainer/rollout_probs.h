// Private to the core: how the rollout's log-probs compare with the trainer's
// old log-probs for the same tokens (docs/exact-logprobs.md).
#pragma once

#include <cstdint>

#include "rlcore/batch.h"
#include "trainer/step_metrics.h"

namespace rlcore::trainer {

// The asynchronous modes' rows: the version of the weights that sampled every
// token of the row, or -1 when its tokens span several versions (partial rollouts). [B] int64.
inline constexpr const char* kSampledByVersion = "sampled_by_version";

// verl's training/rollout_probs_diff_max and _mean (|p_rollout - p_trainer| over
// the response tokens) and rlcore's training/rollout_logprob_mismatches (the
// tokens whose two log-probs differ at all) among training/rollout_logprob_compared
// tokens. The trainer's log-probs come from weights `version`; a batch with
// kSampledByVersion compares only the rows that version sampled whole (an older
// version's tokens have no trainer log-probs of theirs to meet). With
// `check_exact`, a mismatch throws Error naming `step`, the sample (and its
// prompt uid) and the token.
void add_rollout_probs_diff(const Batch& batch, StepMetrics& metrics, bool check_exact, int64_t step, int64_t version);

}  // namespace rlcore::trainer
