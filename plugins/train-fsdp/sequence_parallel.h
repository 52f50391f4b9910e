// Ulysses sequence parallelism (DeepSpeed-Ulysses; verl's
// ulysses_sequence_parallel_size): the ranks of the pool's "sp" group hold
// the same rows and split each packed micro-batch's tokens into equal slices.
// Every layer runs on this rank's slice except attention, which trades the
// slice of every head for the whole sequence of heads / N (one all-to-all
// before, one after), so activations per rank fall as 1 / N. The head's
// outputs are gathered back so that every rank computes the whole loss.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include "rlcore/batch.h"
#include "rlcore/comm_context.h"
#include "rlcore/model/config.h"
#include "rlcore/model/layers.h"
#include "rlcore/model/transformer.h"
#include "train-common/micro_batches.h"

namespace rlcore::train_fsdp {

class UlyssesParallel {
 public:
  // ConfigError naming ulysses_sequence_parallel_size when `group`'s size
  // does not divide the model's attention and key-value heads, or the model
  // is a mixture of experts (its router losses and routing span every token).
  UlyssesParallel(const CommGroup& group, const model::ModelConfig& config);
  UlyssesParallel(const UlyssesParallel&) = delete;
  UlyssesParallel& operator=(const UlyssesParallel&) = delete;

  int64_t size() const { return group_.size(); }

  // A packed micro-batch padded to a multiple of size() tokens (one more
  // sequence, of token 0, that nothing reads) and cut down to this rank's
  // slice, its context exchanging heads in attention. A padded micro-batch
  // (rows of padding only) is left whole.
  void slice(train_common::MicroBatch& micro, const model::Transformer& model) const;

  // This rank's outputs at its predictions [n_local, ...] -> every rank's, in
  // order [n, ...]. The gradient of this rank's part comes back summed over the
  // group: size() times one loss's, which the gradients' mean over every rank
  // (dp x sp) turns into the mean over data-parallel replicas.
  at::Tensor gather_predictions(const train_common::Packing& packing, const at::Tensor& local) const;

  // ValueError when the group's ranks were handed different rows.
  void check_same_rows(const Batch& batch, const std::string& engine) const;

 private:
  at::Tensor heads_to_sequence(const at::Tensor& x) const;
  at::Tensor sequence_to_heads(const at::Tensor& y) const;

  const CommGroup& group_;
  model::ForwardContext::SequenceParallel exchange_;
};

// The engine's sequence parallelism: none for `size` 1; ConfigError naming
// the key when packing is off or the pool has no "sp" group of that size.
std::unique_ptr<UlyssesParallel> make_ulysses(int64_t size, bool use_remove_padding, const CommContext* comm,
                                              const model::ModelConfig& config);

}  // namespace rlcore::train_fsdp
