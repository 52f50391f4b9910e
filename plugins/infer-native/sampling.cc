// Greedy and filtered (top-k / top-p) sampling by inverse CDF, in fp32.
#include "sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "rlcore/error.h"

namespace rlcore::infer_native {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Keeps the smallest set of most likely tokens whose mass reaches top_p
// (a token stays when the mass strictly before it is below top_p).
at::Tensor apply_top_p(const at::Tensor& scaled, double top_p) {
  const auto [sorted, order] = scaled.sort(/*dim=*/-1, /*descending=*/true);
  const at::Tensor probs = at::softmax(sorted, -1);
  const at::Tensor mass_before = probs.cumsum(-1) - probs;
  const at::Tensor kept = sorted.masked_fill(mass_before >= top_p, -std::numeric_limits<float>::infinity());
  return at::empty_like(scaled).scatter_(-1, order, kept);
}

}  // namespace

void validate_sampling(const SamplingParams& params) {
  auto fail = [](const std::string& field, const std::string& what) {
    throw ValueError("sampling params: " + field + " " + what);
  };
  if (params.n < 1) fail("n", "must be >= 1, got " + std::to_string(params.n));
  if (params.max_tokens < 1) fail("max_tokens", "must be >= 1, got " + std::to_string(params.max_tokens));
  if (!(params.temperature >= 0.0) || !std::isfinite(params.temperature))
    fail("temperature", "must be a finite number >= 0, got " + std::to_string(params.temperature));
  if (params.top_k < -1) fail("top_k", "must be -1 or 0 (disabled) or >= 1, got " + std::to_string(params.top_k));
  if (!(params.top_p > 0.0 && params.top_p <= 1.0))
    fail("top_p", "must be in (0, 1], got " + std::to_string(params.top_p));
  if (params.seed < -1) fail("seed", "must be -1 (engine-chosen) or >= 0, got " + std::to_string(params.seed));
}

SequenceRng::SequenceRng(uint64_t request_seed, int64_t sequence_index)
    : generator_(at::make_generator<at::CPUGeneratorImpl>(
          splitmix64(request_seed ^ splitmix64(static_cast<uint64_t>(sequence_index))))) {}

double SequenceRng::uniform() {
  // 53 random bits: every double in [0, 1) on a 2^-53 grid, never 1.
  return static_cast<double>(generator_.get<at::CPUGeneratorImpl>()->random64() >> 11) * 0x1.0p-53;
}

SampledTokens sample_tokens(const at::Tensor& logits, const SamplingParams& params, const at::Tensor& uniforms,
                            int64_t top_logprobs) {
  const at::Tensor logits32 = logits.to(at::kFloat);
  SampledTokens out;
  auto keep_top = [&out, top_logprobs](const at::Tensor& logprobs) {
    if (top_logprobs <= 0) return;
    auto [values, indices] = logprobs.topk(std::min(top_logprobs, logprobs.size(-1)), -1);
    out.top_logprobs = values;
    out.top_tokens = indices;
  };
  if (is_greedy(params)) {
    const at::Tensor logprobs = at::log_softmax(logits32, -1);
    out.tokens = logits32.argmax(-1);
    out.logprobs = logprobs.gather(-1, out.tokens.unsqueeze(-1)).squeeze(-1);
    keep_top(logprobs);
    return out;
  }
  const at::Tensor scaled = logits32 / params.temperature;
  const at::Tensor logprobs = at::log_softmax(scaled, -1);
  at::Tensor filtered = scaled;
  const int64_t vocab = scaled.size(-1);
  const bool top_k = params.top_k > 0 && params.top_k < vocab;
  const bool top_p = params.top_p < 1.0;
  if (top_k) {
    const at::Tensor kth = std::get<0>(scaled.topk(params.top_k, -1)).narrow(-1, params.top_k - 1, 1);
    filtered = filtered.masked_fill(filtered < kth, -std::numeric_limits<float>::infinity());
  }
  if (top_p) filtered = apply_top_p(filtered, params.top_p);
  // Inverse CDF: the first token whose cumulative mass exceeds u * total. A
  // token of probability 0 never exceeds its predecessor, so it is never drawn
  // as long as the target stays strictly below the total.
  // Unfiltered, the distribution is exp of the log-probs already computed.
  const at::Tensor cdf = (!top_k && !top_p ? logprobs.exp() : at::softmax(filtered, -1)).cumsum(-1);
  const at::Tensor total = cdf.narrow(-1, vocab - 1, 1);
  const at::Tensor target = at::minimum(uniforms.to(cdf.device(), at::kFloat).unsqueeze(-1) * total,
                                        at::nextafter(total, at::zeros_like(total)));
  out.tokens = at::searchsorted(cdf, target, /*out_int32=*/false, /*right=*/true).squeeze(-1).clamp_max(vocab - 1);
  out.logprobs = logprobs.gather(-1, out.tokens.unsqueeze(-1)).squeeze(-1);
  keep_top(logprobs);
  return out;
}

}  // namespace rlcore::infer_native
