// The fixed batch and loss the train-engine tests share: every rank (and the
// single-process references) builds the same global batch and takes its rows.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "rlcore/batch.h"
#include "rlcore/train_engine.h"

namespace rlcore::testing {

constexpr int64_t kTrainRows = 8;
constexpr int64_t kTrainPrompt = 6;
constexpr int64_t kTrainResponse = 5;

// Left-padded prompts, right-padded responses of varied lengths, random
// advantages and returns; the same on every call.
inline Batch train_batch(int64_t vocab) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(1234);
  const int64_t len = kTrainPrompt + kTrainResponse;
  at::Tensor ids = at::randint(1, vocab, {kTrainRows, len}, generator, at::kLong);
  at::Tensor mask = at::ones({kTrainRows, len}, at::kLong);
  for (int64_t row = 0; row < kTrainRows; ++row) {
    mask[row].slice(0, 0, row % 3).zero_();                        // prompt padding
    mask[row].slice(0, len - (row * 2) % kTrainResponse).zero_();  // response padding
  }
  ids = ids * mask;
  Batch batch(kTrainRows);
  batch.set("input_ids", ids);
  batch.set("attention_mask", mask);
  batch.set("responses", ids.slice(1, kTrainPrompt).clone());
  batch.set("response_mask", mask.slice(1, kTrainPrompt).to(at::kFloat));
  batch.set("advantages", at::randn({kTrainRows, kTrainResponse}, generator));
  batch.set("returns", at::randn({kTrainRows, kTrainResponse}, generator));
  return batch;
}

// verl-style token-mean losses normalised by the global token count (x dp_size,
// as engines average gradients over dp): policy gradient for an LM head,
// squared error for a value head. metrics::Metrics: "loss" (and "entropy" when computed).
inline LossOutput train_loss(const Batch& micro, const ModelOutput& out, const GlobalBatchInfo& global) {
  const at::Tensor mask = micro.tensor("response_mask");
  const double scale = static_cast<double>(global.dp_size) / global.num_tokens;
  at::Tensor loss;
  if (out.values.defined()) {
    loss = 0.5 * ((out.values - micro.tensor("returns")).pow(2) * mask).sum() * scale;
  } else {
    loss = -(out.log_prob * micro.tensor("advantages") * mask).sum() * scale;
  }
  LossOutput result{loss, {{"loss", loss.detach()}}};
  if (out.entropy.defined()) result.metrics["entropy"] = out.entropy.mean().detach();
  return result;
}

}  // namespace rlcore::testing
