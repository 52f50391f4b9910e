// EpochSampler: per-epoch permutations cut into full batches (see sampler.h).
#include "rlcore/core/data/sampler.h"

#include <numeric>
#include <string>

#include "data/random.h"
#include "rlcore/error.h"

namespace rlcore::data {

EpochSampler::EpochSampler(int64_t dataset_size, int64_t batch_size, bool shuffle, int64_t seed)
    : dataset_size_(dataset_size), batch_size_(batch_size), shuffle_(shuffle), seed_(seed) {
  if (batch_size < 1) throw ValueError("sampler: batch size must be >= 1, got " + std::to_string(batch_size));
  steps_per_epoch_ = dataset_size / batch_size;
  if (steps_per_epoch_ == 0) {
    throw ValueError("sampler: batch size " + std::to_string(batch_size) + " is larger than the dataset (" +
                     std::to_string(dataset_size) + " examples), so an epoch has no full batch");
  }
}

std::vector<int64_t> EpochSampler::permutation(int64_t size, bool shuffle, int64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(size));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle) return order;
  std::mt19937_64 engine = data::random::make_engine(seed, epoch);
  for (int64_t i = size - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(data::random::uniform_below(engine, static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

const std::vector<int64_t>& EpochSampler::order_for(int64_t epoch) {
  if (epoch != cached_epoch_) {
    cached_order_ = permutation(dataset_size_, shuffle_, seed_, epoch);
    cached_epoch_ = epoch;
  }
  return cached_order_;
}

std::vector<int64_t> EpochSampler::next() {
  if (state_.position == steps_per_epoch_) state_ = SamplerState{state_.epoch + 1, 0};
  const std::vector<int64_t>& order = order_for(state_.epoch);
  const auto begin = order.begin() + state_.position * batch_size_;
  ++state_.position;
  return std::vector<int64_t>(begin, begin + batch_size_);
}

void EpochSampler::restore(const SamplerState& state) {
  if (state.epoch < 0 || state.position < 0 || state.position > steps_per_epoch_) {
    throw ValueError("sampler: cannot restore epoch " + std::to_string(state.epoch) + " position " +
                     std::to_string(state.position) + "; an epoch has " + std::to_string(steps_per_epoch_) +
                     " batches");
  }
  state_ = state;
}

}  // namespace rlcore::data
