// Private to the core: the padded tensor layout of prompts and responses that
// the trainer and its worker roles exchange (see rlcore/train_engine.h).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/batch.h"
#include "rlcore/columns.h"
#include "rlcore/inference_engine.h"

namespace rlcore::trainer {

// Left-pads `prompts` to their longest length: columns::kPromptIds and kPromptMask.
Batch make_prompt_batch(const std::vector<std::vector<int32_t>>& prompts, int64_t pad_id);
// The prompts of a prompt batch without their padding.
std::vector<std::vector<int32_t>> unpad_prompts(const Batch& prompts);

// The engine layout for prompt row i + response i, responses right-padded to
// `response_length` with pad_id: input_ids, attention_mask, position_ids,
// responses, response_mask (float), columns::kRolloutLogProbs and kFinishedByStop.
Batch make_sequence_batch(const Batch& prompts, const GenerationOutput& generated, int64_t response_length,
                          int64_t pad_id);

// The same layout for supervised pairs (SFT): every response token counts.
Batch make_supervised_batch(const std::vector<std::vector<int32_t>>& prompts,
                            const std::vector<std::vector<int32_t>>& responses, int64_t pad_id);

// cumsum(mask) - 1, clamped at 0 (HF's position ids for padded rows).
at::Tensor position_ids_from_mask(const at::Tensor& attention_mask);

// Row i's ids where mask is nonzero, for [B, T] ids and mask.
std::vector<std::vector<int32_t>> masked_rows(const at::Tensor& ids, const at::Tensor& mask);
// Each row's response tokens without padding (to decode and grade them).
std::vector<std::vector<int32_t>> response_tokens(const Batch& sequences);

}  // namespace rlcore::trainer
