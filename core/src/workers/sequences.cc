// Padding prompts and responses into the engine layout (see trainer/sequences.h).
#include "workers/sequences.h"

#include <algorithm>

#include <ATen/ATen.h>

#include "rlcore/error.h"
#include "rlcore/train_engine.h"

namespace rlcore::workers {
namespace {

int64_t longest(const std::vector<std::vector<int32_t>>& rows) {
  size_t length = 0;
  for (const auto& row : rows) length = std::max(length, row.size());
  return static_cast<int64_t>(length);
}

// Rows copied into a [B, width] int64 tensor filled with pad_id: left-aligned, or right-aligned (left padding).
at::Tensor pack_rows(const std::vector<std::vector<int32_t>>& rows, int64_t width, int64_t pad_id, bool left_pad,
                     at::Tensor* mask) {
  const auto batch = static_cast<int64_t>(rows.size());
  at::Tensor ids = at::full({batch, width}, pad_id, at::kLong);
  *mask = at::zeros({batch, width}, at::kLong);
  auto ids_a = ids.accessor<int64_t, 2>();
  auto mask_a = mask->accessor<int64_t, 2>();
  for (int64_t i = 0; i < batch; ++i) {
    const auto length = std::min<int64_t>(static_cast<int64_t>(rows[i].size()), width);
    const int64_t start = left_pad ? width - length : 0;
    for (int64_t t = 0; t < length; ++t) {
      ids_a[i][start + t] = rows[i][t];
      mask_a[i][start + t] = 1;
    }
  }
  return ids;
}

// `response_present`: the response tokens there are (attention); `loss_mask`:
// those the loss covers (response_mask), the same but for multi-turn rows.
Batch join(const at::Tensor& prompt_ids, const at::Tensor& prompt_mask, const at::Tensor& response_ids,
           const at::Tensor& response_present, const at::Tensor& loss_mask) {
  Batch out(prompt_ids.size(0));
  const at::Tensor attention_mask = at::cat({prompt_mask, response_present}, 1);
  out.set(columns::kInputIds, at::cat({prompt_ids, response_ids}, 1));
  out.set(columns::kAttentionMask, attention_mask);
  out.set(columns::kPositionIds, position_ids_from_mask(attention_mask));
  out.set(columns::kResponses, response_ids);
  out.set(columns::kResponseMask, loss_mask.to(at::kFloat));
  return out;
}

// Row i's `masks[i]` in a [B, width] float tensor (zeros past each row's end).
at::Tensor pack_masks(const std::vector<std::vector<uint8_t>>& masks, int64_t width) {
  at::Tensor out = at::zeros({static_cast<int64_t>(masks.size()), width}, at::kFloat);
  auto out_a = out.accessor<float, 2>();
  for (size_t i = 0; i < masks.size(); ++i) {
    for (int64_t t = 0; t < std::min<int64_t>(static_cast<int64_t>(masks[i].size()), width); ++t) {
      out_a[static_cast<int64_t>(i)][t] = masks[i][static_cast<size_t>(t)];
    }
  }
  return out;
}

// Each row's log-probs in a [B, width] float tensor (zeros past each row's end).
at::Tensor pack_log_probs(const std::vector<std::vector<float>>& rows, int64_t width) {
  at::Tensor out = at::zeros({static_cast<int64_t>(rows.size()), width}, at::kFloat);
  auto out_a = out.accessor<float, 2>();
  for (size_t i = 0; i < rows.size(); ++i) {
    for (int64_t t = 0; t < std::min<int64_t>(static_cast<int64_t>(rows[i].size()), width); ++t) {
      out_a[static_cast<int64_t>(i)][t] = rows[i][static_cast<size_t>(t)];
    }
  }
  return out;
}

}  // namespace

at::Tensor position_ids_from_mask(const at::Tensor& attention_mask) {
  return (attention_mask.to(at::kLong).cumsum(1) - 1).clamp_min(0);
}

Batch make_prompt_batch(const std::vector<std::vector<int32_t>>& prompts, int64_t pad_id) {
  at::Tensor mask;
  at::Tensor ids = pack_rows(prompts, longest(prompts), pad_id, /*left_pad=*/true, &mask);
  Batch out(static_cast<int64_t>(prompts.size()));
  out.set(columns::kPromptIds, ids);
  out.set(columns::kPromptMask, mask);
  return out;
}

Batch trajectory_batch(const std::vector<std::vector<int32_t>>& prompt_ids,
                       const std::vector<agent::Trajectory>& trajectories, int64_t response_length, int64_t pad_id) {
  MaskedResponses responses;
  for (const agent::Trajectory& trajectory : trajectories) {
    responses.ids.push_back(trajectory.response_ids);
    responses.loss_masks.push_back(trajectory.response_mask);
    responses.logprobs.push_back(trajectory.logprobs);
    responses.stopped.push_back(trajectory.finish_reason == FinishReason::kStop);
  }
  return make_masked_sequence_batch(prompt_ids, responses, response_length, pad_id);
}

std::vector<std::vector<int32_t>> masked_rows(const at::Tensor& ids, const at::Tensor& mask) {
  const at::Tensor ids_long = ids.to(at::kLong).contiguous();
  const at::Tensor mask_long = mask.to(at::kLong).contiguous();
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(ids.size(0)));
  auto ids_a = ids_long.accessor<int64_t, 2>();
  auto mask_a = mask_long.accessor<int64_t, 2>();
  for (int64_t i = 0; i < ids.size(0); ++i) {
    for (int64_t t = 0; t < ids.size(1); ++t) {
      if (mask_a[i][t] != 0) rows[i].push_back(static_cast<int32_t>(ids_a[i][t]));
    }
  }
  return rows;
}

std::vector<std::vector<int32_t>> unpad_prompts(const Batch& prompts) {
  return masked_rows(prompts.tensor(columns::kPromptIds), prompts.tensor(columns::kPromptMask));
}

Batch make_sequence_batch(const Batch& prompts, const GenerationOutput& generated, int64_t response_length,
                          int64_t pad_id) {
  const int64_t batch = prompts.size();
  if (static_cast<int64_t>(generated.token_ids.size()) != batch) {
    throw ValueError("rollout returned " + std::to_string(generated.token_ids.size()) + " responses for " +
                     std::to_string(batch) + " prompts");
  }
  at::Tensor response_mask;
  const at::Tensor responses = pack_rows(generated.token_ids, response_length, pad_id, false, &response_mask);
  Batch out = join(prompts.tensor(columns::kPromptIds), prompts.tensor(columns::kPromptMask), responses, response_mask,
                   response_mask);
  at::Tensor stopped = at::zeros({batch}, at::kLong);
  for (int64_t i = 0; i < batch; ++i) stopped[i] = generated.finish_reasons[i] == FinishReason::kStop ? 1 : 0;
  out.set(columns::kRolloutLogProbs, pack_log_probs(generated.logprobs, response_length));
  out.set(columns::kFinishedByStop, stopped);
  return out;
}

at::Tensor pack_routing(const std::vector<at::Tensor>& routed, const Batch& batch) {
  const at::Tensor& mask = batch.tensor(columns::kAttentionMask);
  const int64_t rows = mask.size(0);
  const int64_t prompt_width = mask.size(1) - batch.tensor(columns::kResponses).size(1);
  if (static_cast<int64_t>(routed.size()) != rows || rows == 0) {
    throw ValueError("rollout recorded the routing of " + std::to_string(routed.size()) + " responses for " +
                     std::to_string(rows) + " rows");
  }
  at::Tensor out = at::full({rows, mask.size(1), routed[0].size(1), routed[0].size(2)}, -1, at::kShort);
  const at::Tensor prompt_tokens = mask.slice(1, 0, prompt_width).sum(1).cpu();
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t prompt = prompt_tokens[i].item<int64_t>();
    const at::Tensor& row = routed[static_cast<size_t>(i)];
    // Left-padded prompt, then the response: the routed tokens end one short of the response.
    const int64_t fed = std::min(row.size(0), mask.size(1) - (prompt_width - prompt));
    out[i].slice(0, prompt_width - prompt, prompt_width - prompt + fed).copy_(row.slice(0, 0, fed));
  }
  return out;
}

Batch make_masked_sequence_batch(const std::vector<std::vector<int32_t>>& prompts, const MaskedResponses& responses,
                                 int64_t response_length, int64_t pad_id) {
  const auto batch = static_cast<int64_t>(prompts.size());
  if (responses.ids.size() != prompts.size() || responses.loss_masks.size() != prompts.size()) {
    throw ValueError("make_masked_sequence_batch: " + std::to_string(prompts.size()) + " prompts, " +
                     std::to_string(responses.ids.size()) + " responses, " +
                     std::to_string(responses.loss_masks.size()) + " masks");
  }
  at::Tensor prompt_mask;
  at::Tensor present;
  const at::Tensor prompt_ids = pack_rows(prompts, longest(prompts), pad_id, true, &prompt_mask);
  const at::Tensor response_ids = pack_rows(responses.ids, response_length, pad_id, false, &present);
  Batch out = join(prompt_ids, prompt_mask, response_ids, present, pack_masks(responses.loss_masks, response_length));
  out.set(columns::kRolloutLogProbs, pack_log_probs(responses.logprobs, response_length));
  at::Tensor stopped = at::zeros({batch}, at::kLong);
  for (int64_t i = 0; i < batch && i < static_cast<int64_t>(responses.stopped.size()); ++i) {
    stopped[i] = responses.stopped[static_cast<size_t>(i)] ? 1 : 0;
  }
  out.set(columns::kFinishedByStop, stopped);
  return out;
}

Batch make_supervised_batch(const std::vector<std::vector<int32_t>>& prompts,
                            const std::vector<std::vector<int32_t>>& responses, int64_t pad_id,
                            const std::vector<std::vector<uint8_t>>* loss_masks) {
  if (prompts.size() != responses.size())
    throw ValueError("make_supervised_batch: prompts and responses differ in count");
  at::Tensor prompt_mask;
  at::Tensor response_mask;
  const at::Tensor prompt_ids = pack_rows(prompts, longest(prompts), pad_id, true, &prompt_mask);
  const at::Tensor response_ids = pack_rows(responses, longest(responses), pad_id, false, &response_mask);
  if (loss_masks == nullptr) return join(prompt_ids, prompt_mask, response_ids, response_mask, response_mask);
  return join(prompt_ids, prompt_mask, response_ids, response_mask, pack_masks(*loss_masks, response_ids.size(1)));
}

at::Tensor response_attention(const Batch& sequences) {
  const at::Tensor& attention = sequences.tensor(columns::kAttentionMask);
  const int64_t width = sequences.tensor(columns::kResponses).size(1);
  return attention.narrow(1, attention.size(1) - width, width);
}

std::vector<std::vector<int32_t>> response_tokens(const Batch& sequences) {
  return masked_rows(sequences.tensor(columns::kResponses), response_attention(sequences));
}

}  // namespace rlcore::workers
