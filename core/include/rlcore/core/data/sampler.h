// Batches of dataset indices with verl's StatefulDataLoader semantics: a fresh
// permutation each epoch, the last partial batch dropped, and a small state that
// a checkpoint saves so a resumed run sees exactly the batches an uninterrupted one would.
#pragma once

#include <cstdint>
#include <vector>

#include "rlcore/export.h"

namespace rlcore::data {

struct SamplerState {
  int64_t epoch = 0;
  int64_t position = 0;  // batches already taken in this epoch
};

class RLCORE_API EpochSampler {
 public:
  // Throws ValueError when batch_size < 1 or batch_size > dataset_size (no full batch).
  EpochSampler(int64_t dataset_size, int64_t batch_size, bool shuffle, int64_t seed);

  // The next batch's indices; moves to the next epoch when this one is exhausted.
  std::vector<int64_t> next();
  int64_t steps_per_epoch() const { return steps_per_epoch_; }

  SamplerState state() const { return state_; }
  // Throws ValueError for a negative epoch or a position outside [0, steps_per_epoch()].
  void restore(const SamplerState& state);

  // The order of epoch `epoch`: a pure function of (seed, epoch), identity when not
  // shuffling. std::mt19937_64 seeded through std::seed_seq with the seed's and the
  // epoch's 32-bit halves, then a Fisher-Yates shuffle with rejection-sampled draws:
  // every step is fixed by the C++ standard, so the order is the same on every platform.
  static std::vector<int64_t> permutation(int64_t size, bool shuffle, int64_t seed, int64_t epoch);

 private:
  const std::vector<int64_t>& order_for(int64_t epoch);

  int64_t dataset_size_;
  int64_t batch_size_;
  bool shuffle_;
  int64_t seed_;
  int64_t steps_per_epoch_;
  SamplerState state_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> cached_order_;
};

}  // namespace rlcore::data
