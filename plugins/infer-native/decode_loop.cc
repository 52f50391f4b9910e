// The prefill + decode loop over one batch of sequences.
#include "decode_loop.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

namespace rlcore::infer_native {
namespace {

at::Tensor index_tensor(const std::vector<int64_t>& indices, const at::Device& device) {
  return at::tensor(indices, at::kLong).to(device);
}

// Left-padded [P, L] ids and mask of the distinct prompts, as HF generate() pads.
std::pair<at::Tensor, at::Tensor> left_pad(const std::vector<std::vector<int32_t>>& prompts,
                                           const std::vector<int64_t>& used) {
  int64_t longest = 0;
  for (int64_t p : used) longest = std::max<int64_t>(longest, static_cast<int64_t>(prompts[p].size()));
  const auto rows = static_cast<int64_t>(used.size());
  at::Tensor ids = at::zeros({rows, longest}, at::kLong);
  at::Tensor mask = at::zeros({rows, longest}, at::kLong);
  auto ids_a = ids.accessor<int64_t, 2>();
  auto mask_a = mask.accessor<int64_t, 2>();
  for (int64_t r = 0; r < rows; ++r) {
    const auto& prompt = prompts[used[r]];
    const int64_t pad = longest - static_cast<int64_t>(prompt.size());
    for (size_t t = 0; t < prompt.size(); ++t) {
      ids_a[r][pad + static_cast<int64_t>(t)] = prompt[t];
      mask_a[r][pad + static_cast<int64_t>(t)] = 1;
    }
  }
  return {ids, mask};
}

bool is_stop(int32_t token, const std::vector<int32_t>& stop_ids) {
  return std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end();
}

}  // namespace

DecodeStats decode_batch(const model::Transformer& model, const std::vector<std::vector<int32_t>>& prompts,
                         std::vector<Sequence*>& sequences, const SamplingParams& params, DecodeMode mode) {
  DecodeStats stats;
  if (sequences.empty()) return stats;
  c10::InferenceMode inference_mode;
  const at::Device device = model.embed_tokens.device();

  // Distinct prompts, each prefilled once; row r of the batch is sequence r.
  std::vector<int64_t> used;
  std::vector<int64_t> prompt_row;
  int64_t max_limit = 0;
  for (const Sequence* seq : sequences) {
    if (used.empty() || used.back() != seq->prompt) used.push_back(seq->prompt);
    prompt_row.push_back(static_cast<int64_t>(used.size()) - 1);
    max_limit = std::max(max_limit, seq->limit);
  }
  const auto [ids, mask] = left_pad(prompts, used);
  // The last sampled token is never fed back, hence max_limit - 1.
  model::KvCache cache = model.make_cache(static_cast<int64_t>(used.size()), ids.size(1) + max_limit - 1);
  at::Tensor logits = model.forward(ids.to(device), cache, mask.to(device), {}, /*keep_last=*/1).select(1, 0);
  if (used.size() != sequences.size()) {
    const at::Tensor rows = index_tensor(prompt_row, device);
    cache.keep_rows(rows);
    logits = logits.index_select(0, rows);
  }

  DecodeStepper stepper(model, cache, mode, stats);
  // rows[r]: the sequence of batch row r, nullptr once it has finished while
  // its row stays (shape-static steps keep a batch shape as long as they can).
  std::vector<Sequence*> rows = sequences;
  const bool greedy = is_greedy(params);
  while (true) {
    const auto batch = static_cast<int64_t>(rows.size());
    at::Tensor uniforms;
    if (!greedy) {
      uniforms = at::empty({batch}, at::kDouble);
      double* u = uniforms.data_ptr<double>();
      // A finished row draws nothing: every sequence's stream stays its own.
      for (int64_t r = 0; r < batch; ++r) u[r] = rows[r] != nullptr ? rows[r]->rng.uniform() : 0.0;
    }
    const SampledTokens sampled = sample_tokens(logits, params, uniforms);
    const at::Tensor tokens_cpu = sampled.tokens.to(at::kCPU);
    const at::Tensor logprobs_cpu = sampled.logprobs.to(at::kCPU);
    const int64_t* tokens = tokens_cpu.data_ptr<int64_t>();
    const float* logprobs = logprobs_cpu.data_ptr<float>();

    std::vector<int64_t> keep;
    keep.reserve(rows.size());
    for (int64_t r = 0; r < batch; ++r) {
      if (rows[r] == nullptr) continue;
      Sequence& seq = *rows[r];
      const auto token = static_cast<int32_t>(tokens[r]);
      seq.token_ids.push_back(token);
      seq.logprobs.push_back(logprobs[r]);
      if (is_stop(token, params.stop_token_ids)) {
        seq.finish_reason = FinishReason::kStop;
      } else if (static_cast<int64_t>(seq.token_ids.size()) >= seq.limit) {
        seq.finish_reason = FinishReason::kLength;
      } else {
        keep.push_back(r);
      }
    }
    if (keep.empty()) return stats;

    at::Tensor next = sampled.tokens;
    const auto live = static_cast<int64_t>(keep.size());
    // Eager steps shrink with every finished row; shape-static ones (a new
    // graph each time) only once half the rows have finished.
    const bool compact = stepper.mode() == DecodeMode::kEager ? live != batch : 2 * live <= batch;
    if (compact) {
      const at::Tensor kept = index_tensor(keep, device);
      stepper.keep_rows(kept);
      next = next.index_select(0, kept);
      std::vector<Sequence*> still;
      still.reserve(keep.size());
      for (int64_t r : keep) still.push_back(rows[r]);
      rows.swap(still);
    } else {
      std::vector<Sequence*> still(rows.size(), nullptr);
      for (int64_t r : keep) still[r] = rows[r];
      rows.swap(still);
    }
    logits = stepper.step(next);
  }
}

}  // namespace rlcore::infer_native
