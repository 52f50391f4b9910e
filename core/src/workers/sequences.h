// Private to the core: the padded tensor layout of prompts and responses that
// the trainer and its worker roles exchange (see rlcore/train_engine.h).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/batch.h"
#include "rlcore/columns.h"
#include "rlcore/core/agent/agent_loop.h"
#include "rlcore/inference_engine.h"

namespace rlcore::workers {

// Left-pads `prompts` to their longest length: columns::kPromptIds and kPromptMask.
Batch make_prompt_batch(const std::vector<std::vector<int32_t>>& prompts, int64_t pad_id);
// The prompts of a prompt batch without their padding.
std::vector<std::vector<int32_t>> unpad_prompts(const Batch& prompts);

// The engine layout for prompt row i + response i, responses right-padded to
// `response_length` with pad_id: input_ids, attention_mask, position_ids,
// responses, response_mask (float), columns::kRolloutLogProbs and kFinishedByStop.
Batch make_sequence_batch(const Batch& prompts, const GenerationOutput& generated, int64_t response_length,
                          int64_t pad_id);

// The rollout's routing (RecordsRouting::take_routing: per row [prompt tokens +
// response tokens - 1, sparse layers, top_k]) in the engine layout of `batch`
// (make_sequence_batch's): columns::kRoutedExperts [B, P + R, sparse layers,
// top_k] int16, -1 where nothing was routed (padding, the last token).
at::Tensor pack_routing(const std::vector<at::Tensor>& routed, const Batch& batch);

// Multi-turn responses (the agent loop's): the tokens, which of them the loss
// covers (the model's), their rollout log-probs, and whether each ended with a stop.
struct MaskedResponses {
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::vector<uint8_t>> loss_masks;
  std::vector<std::vector<float>> logprobs;
  std::vector<bool> stopped;
};

// The engine layout for multi-turn rows: attention_mask covers every response
// token, response_mask only the loss mask's.
Batch make_masked_sequence_batch(const std::vector<std::vector<int32_t>>& prompts, const MaskedResponses& responses,
                                 int64_t response_length, int64_t pad_id);

// The agent loop's trajectories in that layout (one per prompt, in order).
Batch trajectory_batch(const std::vector<std::vector<int32_t>>& prompt_ids,
                       const std::vector<agent::Trajectory>& trajectories, int64_t response_length, int64_t pad_id);

// The same layout for supervised pairs (SFT): every response token counts, or
// those of `loss_masks` (multi-turn demonstrations) where given.
Batch make_supervised_batch(const std::vector<std::vector<int32_t>>& prompts,
                            const std::vector<std::vector<int32_t>>& responses, int64_t pad_id,
                            const std::vector<std::vector<uint8_t>>* loss_masks = nullptr);

// cumsum(mask) - 1, clamped at 0 (HF's position ids for padded rows).
at::Tensor position_ids_from_mask(const at::Tensor& attention_mask);

// Row i's ids where mask is nonzero, for [B, T] ids and mask.
std::vector<std::vector<int32_t>> masked_rows(const at::Tensor& ids, const at::Tensor& mask);
// The response part of attention_mask: every response token there is (model
// and tool tokens), where response_mask has only the model's.
at::Tensor response_attention(const Batch& sequences);
// Each row's response tokens without padding, tool results included (to decode and grade them).
std::vector<std::vector<int32_t>> response_tokens(const Batch& sequences);

}  // namespace rlcore::workers
