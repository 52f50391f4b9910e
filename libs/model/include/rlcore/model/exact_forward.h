// The exact forward (docs/exact-logprobs.md): while it is on, every fp32 CPU
// forward runs its linear layers, RMSNorm and attention through batch-invariant
// kernels, so a token's logits have the same bits in the rollout's prefill, its
// decode steps against the KV cache, and the trainer's forward over the whole
// padded or packed batch, with autograd or without (the backward is ATen's). Set from
// actor_rollout_ref.rollout.exact_logprobs in each worker. Process-wide,
// through the environment (RLCORE_EXACT_FORWARD=1), which the core and the
// engine plugins, each with its own copy of this library, all read. Not covered yet: bf16, CUDA,
// tensor-parallel linears (their override wins), soft-capped attention, MoE.
#pragma once

#include <ATen/core/Tensor.h>

namespace rlcore::model {

void set_exact_forward(bool exact);
bool exact_forward();

// Whether a layer with input `x` and parameter `weight` takes the exact path now.
bool takes_exact_path(const at::Tensor& x, const at::Tensor& weight);

// Query row by row: each score a fixed-recipe dot product (exact_linear.h's),
// times `scaling`; the softmax and the weighted sum of the values over the
// unblocked keys in ascending order. q [B, H, T, D], k and v [B, KV, S, D],
// blocked [B or 1, 1, T, S] (true: the key is hidden) or undefined; returns
// [B, T, H * Dv] like grouped_attention. A query with every key blocked (padding) gets zeros.
at::Tensor exact_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& blocked,
                           double scaling);

// Sets the exact forward for a scope and puts back what was there before.
class ScopedExactForward {
 public:
  explicit ScopedExactForward(bool exact = true) : previous_(exact_forward()) { set_exact_forward(exact); }
  ~ScopedExactForward() { set_exact_forward(previous_); }
  ScopedExactForward(const ScopedExactForward&) = delete;
  ScopedExactForward& operator=(const ScopedExactForward&) = delete;

 private:
  bool previous_;
};

}  // namespace rlcore::model
