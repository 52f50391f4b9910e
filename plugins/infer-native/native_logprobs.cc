// NativeEngine's ReportsLogprobs: the most likely tokens of each sampled
// token's distribution (recorded by the scheduler as it samples) and the
// log-probs of a given sequence (one full forward).
#include <algorithm>
#include <string>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "native_engine.h"
#include "request_checks.h"
#include "rlcore/error.h"

namespace rlcore::infer_native {

void NativeEngine::submit_with_top_logprobs(GenerationRequest request, int64_t top_logprobs) {
  std::lock_guard<FifoMutex> lock(mutex_);
  check_top_logprobs(top_logprobs, /*at_least=*/1, model_->config().vocab_size, "request '" + request.id + "'");
  submit_locked(std::move(request), top_logprobs);
}

std::vector<TopLogprobs> NativeEngine::take_top_logprobs(const std::string& id) {
  std::lock_guard<FifoMutex> lock(mutex_);
  if (Sequence* seq = requests_->find(id)) return std::exchange(seq->top, {});
  auto finished = finished_top_.find(id);
  if (finished == finished_top_.end()) return {};
  std::vector<TopLogprobs> top = std::move(finished->second);
  finished_top_.erase(finished);
  return top;
}

std::vector<PositionLogprobs> NativeEngine::score_tokens(const std::vector<int32_t>& ids, int64_t top_logprobs) {
  std::lock_guard<FifoMutex> lock(mutex_);
  check_ready("score_tokens()");
  if (tp_group_) {
    throw ValueError("infer-native: scoring tokens with tensor_model_parallel_size " + std::to_string(tp_size()) +
                     " is not supported");
  }
  const int64_t vocab = model_->config().vocab_size;
  check_top_logprobs(top_logprobs, /*at_least=*/0, vocab, "score_tokens()");
  check_scored_ids(ids, vocab, max_model_len_);
  std::vector<PositionLogprobs> out;
  if (ids.size() < 2) return out;

  c10::InferenceMode inference_mode;
  const at::Device device = model_->embed_tokens.device();
  const at::Tensor input = at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong);
  const auto positions = static_cast<int64_t>(ids.size()) - 1;
  const at::Tensor logits = model_->forward(input.unsqueeze(0).to(device))[0].narrow(0, 0, positions);
  const at::Tensor logprobs = at::log_softmax(logits.to(at::kFloat), -1);
  const at::Tensor next = input.narrow(0, 1, positions).to(device).unsqueeze(-1);
  const at::Tensor chosen = logprobs.gather(-1, next);
  const at::Tensor rank = ((logprobs > chosen).sum(-1) + 1).to(at::kLong).cpu().contiguous();
  const at::Tensor chosen_cpu = chosen.squeeze(-1).cpu().contiguous();
  const auto chosen_at = chosen_cpu.accessor<float, 1>();
  const auto rank_at = rank.accessor<int64_t, 1>();
  at::Tensor top_ids, top_values;
  if (top_logprobs > 0) {
    auto [values, indices] = logprobs.topk(top_logprobs, -1);
    top_values = values.cpu().contiguous();
    top_ids = indices.cpu().contiguous();
  }
  out.resize(static_cast<size_t>(positions));
  for (int64_t p = 0; p < positions; ++p) {
    PositionLogprobs& position = out[static_cast<size_t>(p)];
    position.logprob = chosen_at[p];
    position.rank = rank_at[p];
    if (top_logprobs > 0) {
      const int64_t* row_ids = top_ids.data_ptr<int64_t>() + p * top_logprobs;
      const float* row_values = top_values.data_ptr<float>() + p * top_logprobs;
      position.top.token_ids.assign(row_ids, row_ids + top_logprobs);
      position.top.logprobs.assign(row_values, row_values + top_logprobs);
    }
  }
  return out;
}

}  // namespace rlcore::infer_native
