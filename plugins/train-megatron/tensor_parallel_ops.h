// Megatron's tensor-parallel communication as autograd functions, and the
// vocab-parallel embedding and log-probability built from them. With a
// single-rank group every op is the plain local computation.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "rlcore/comm_context.h"

namespace rlcore::train_megatron {

// Forward identity, backward all-reduce: the input of column-parallel linears
// (each rank's branch sees only part of the gradient).
at::Tensor copy_to_tp(const at::Tensor& x, const CommGroup& tp);

// Forward all-reduce (sum), backward identity: the output of row-parallel
// linears and any per-rank partial sum that every rank then uses. bf16 is
// summed in fp32 (Gloo cannot sum bf16) and rounded once.
at::Tensor reduce_from_tp(const at::Tensor& x, const CommGroup& tp);

// Embedding rows of a vocabulary shard: rank r holds ids [vocab_start, vocab_start + rows).
at::Tensor vocab_parallel_embedding(const at::Tensor& ids, const at::Tensor& weight_shard, int64_t vocab_start,
                                    const CommGroup& tp);

struct TokenLogProbs {
  at::Tensor log_prob;        // [B, R] float32
  at::Tensor entropy;         // [B, R] float32; undefined unless asked
  at::Tensor sum_pi_squared;  // [B, R] float32, Σ_v softmax(logits)_v²; undefined unless asked
};

// log softmax(logits)[target] (and the entropy, Σπ²) from vocabulary-sharded
// logits [B, R, V / tp] (already divided by the temperature), without
// gathering the vocabulary: max, sum of exp and the target's logit are reduced over tp.
TokenLogProbs vocab_parallel_log_probs(const at::Tensor& logits_shard, const at::Tensor& targets, int64_t vocab_start,
                                       const CommGroup& tp, bool entropy, bool sum_pi_squared = false);

}  // namespace rlcore::train_megatron
