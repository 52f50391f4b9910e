// The names of Batch columns that more than one component reads or writes:
// the one place each is spelled. Shapes: B rows, L = P + R tokens per row
// (P prompt, then R response tokens); the engine layout is described in
// rlcore/train_engine.h.
#pragma once

namespace rlcore::columns {

// The engine layout every TrainEngine reads ([B, L] int64 but the last two).
inline constexpr const char* kInputIds = "input_ids";
inline constexpr const char* kAttentionMask = "attention_mask";
inline constexpr const char* kPositionIds = "position_ids";
inline constexpr const char* kResponses = "responses";         // [B, R] int64
inline constexpr const char* kResponseMask = "response_mask";  // [B, R]

// A generate call's input and the rollout's extra outputs.
inline constexpr const char* kPromptIds = "prompt_ids";               // [B, P] int64, left-padded with pad_id
inline constexpr const char* kPromptMask = "prompt_mask";             // [B, P] int64
inline constexpr const char* kRolloutLogProbs = "rollout_log_probs";  // [B, R] float
inline constexpr const char* kFinishedByStop = "finished_by_stop";    // [B] int64: ended with a stop token
// [B, L, sparse layers, top_k] int16: the experts each token was routed to (-1: none recorded);
// routing replay (RecordsRouting, ReplaysRouting in rlcore/capabilities.h).
inline constexpr const char* kRoutedExperts = "routed_experts";
inline constexpr const char* kUid = "uid";  // [B] int64: the prompt a row answers (rows of one prompt form a group)

// What the RL step adds (verl's DataProto names).
inline constexpr const char* kOldLogProbs = "old_log_probs";              // [B, R] the actor's, before the update
inline constexpr const char* kEntropys = "entropys";                      // [B, R] with kOldLogProbs
inline constexpr const char* kSumPiSquared = "sum_pi_squared";            // [B, R] with kOldLogProbs, when asked
inline constexpr const char* kRefLogProb = "ref_log_prob";                // [B, R] the reference policy's
inline constexpr const char* kValues = "values";                          // [B, R] the critic's
inline constexpr const char* kTokenLevelScores = "token_level_scores";    // [B, R] the reward, at the last token
inline constexpr const char* kTokenLevelRewards = "token_level_rewards";  // [B, R] scores less the KL penalty
inline constexpr const char* kRewardBaselines = "reward_baselines";       // [B] ReMax: the greedy response's reward
inline constexpr const char* kAdvantages = "advantages";                  // [B, R]
inline constexpr const char* kReturns = "returns";                        // [B, R]
inline constexpr const char* kRolloutIsWeights = "rollout_is_weights";    // [B, R] rollout correction, for the loss
// + a grader extra's name ("reward_extra/acc"): [B] that reward component (gdpo's inputs).
inline constexpr const char* kRewardComponentPrefix = "reward_extra/";

}  // namespace rlcore::columns
