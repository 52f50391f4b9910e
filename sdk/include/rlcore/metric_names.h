// The metric names that more than one part of rlcore writes or reads (the
// losses, the trainers, the report): verl's names, spelled once, as columns.h
// spells the Batch's columns. A plugin's policy loss reports its KL and clip
// fractions under these names for the trainer's console line and the report.
#pragma once

namespace rlcore::metric_names {

inline constexpr const char* kActorPpoKl = "actor/ppo_kl";
inline constexpr const char* kActorPgClipfrac = "actor/pg_clipfrac";
inline constexpr const char* kActorKlLoss = "actor/kl_loss";
inline constexpr const char* kActorEntropy = "actor/entropy";
inline constexpr const char* kActorPgLoss = "actor/pg_loss";
inline constexpr const char* kActorPgClipfracLower = "actor/pg_clipfrac_lower";
inline constexpr const char* kActorLr = "actor/lr";
inline constexpr const char* kActorGradNorm = "actor/grad_norm";

inline constexpr const char* kCriticVfLoss = "critic/vf_loss";
inline constexpr const char* kCriticLr = "critic/lr";
inline constexpr const char* kCriticGradNorm = "critic/grad_norm";
inline constexpr const char* kCriticScoreMean = "critic/score/mean";

inline constexpr const char* kSftLoss = "sft/loss";

inline constexpr const char* kResponseLengthMean = "response_length/mean";

inline constexpr const char* kAsyncStalenessMean = "async/staleness/mean";
inline constexpr const char* kAsyncStalenessMax = "async/staleness/max";

inline constexpr const char* kFullyAsyncPartialRatio = "fully_async/partial/partial_ratio";
inline constexpr const char* kFullyAsyncMaxPartialSpan = "fully_async/partial/max_partial_span";

inline constexpr const char* kTrainerIdleRatio = "trainer/idle_ratio";

inline constexpr const char* kRollouterIdleS = "rollouter/idle_s";
inline constexpr const char* kRollouterIdleRatio = "rollouter/idle_ratio";

inline constexpr const char* kTimingWaitPrevGen = "timing_s/wait_prev_gen";
inline constexpr const char* kTimingTesting = "timing_s/testing";
inline constexpr const char* kTimingStep = "timing_s/step";
inline constexpr const char* kTimingGen = "timing_s/gen";

inline constexpr const char* kPerfThroughput = "perf/throughput";
inline constexpr const char* kPerfRolloutTokensPerS = "perf/rollout_tokens_per_s";

}  // namespace rlcore::metric_names
