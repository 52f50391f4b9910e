// EpochSampler: full batches of a fresh permutation each epoch, and exact resumption.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "rlcore/core/data/sampler.h"
#include "rlcore/error.h"

using rlcore::data::EpochSampler;
using rlcore::data::SamplerState;

namespace {

std::vector<std::vector<int64_t>> take(EpochSampler& sampler, int count) {
  std::vector<std::vector<int64_t>> batches;
  for (int i = 0; i < count; ++i) batches.push_back(sampler.next());
  return batches;
}

std::vector<int64_t> flatten(const std::vector<std::vector<int64_t>>& batches, size_t from, size_t to) {
  std::vector<int64_t> all;
  for (size_t i = from; i < to; ++i) all.insert(all.end(), batches[i].begin(), batches[i].end());
  return all;
}

}  // namespace

TEST_CASE("an epoch is disjoint full batches, the remainder dropped", "[sampler]") {
  EpochSampler sampler(10, 3, true, 7);
  CHECK(sampler.steps_per_epoch() == 3);
  const auto batches = take(sampler, 6);
  for (const auto& batch : batches) CHECK(batch.size() == 3);
  for (size_t epoch = 0; epoch < 2; ++epoch) {
    const auto indices = flatten(batches, epoch * 3, epoch * 3 + 3);
    const std::set<int64_t> distinct(indices.begin(), indices.end());
    CHECK(distinct.size() == 9);
    CHECK(*distinct.begin() >= 0);
    CHECK(*distinct.rbegin() <= 9);
  }
  CHECK(sampler.state().epoch == 1);
  CHECK(sampler.state().position == 3);
}

TEST_CASE("each epoch is reshuffled; seeds give different orders; no shuffle is in order", "[sampler]") {
  const auto e0 = EpochSampler::permutation(100, true, 1, 0);
  const auto e1 = EpochSampler::permutation(100, true, 1, 1);
  CHECK(e0 != e1);
  CHECK(std::is_permutation(e0.begin(), e0.end(), e1.begin()));
  CHECK(e0 == EpochSampler::permutation(100, true, 1, 0));
  CHECK(e0 != EpochSampler::permutation(100, true, 2, 0));
  // seed + epoch must not collide across (seed, epoch) pairs.
  CHECK(EpochSampler::permutation(100, true, 2, 0) != EpochSampler::permutation(100, true, 1, 1));

  EpochSampler sampler(100, 10, true, 1);
  CHECK(flatten(take(sampler, 10), 0, 10) == e0);
  CHECK(flatten(take(sampler, 10), 0, 10) == e1);

  EpochSampler ordered(5, 2, false, 1);
  CHECK(take(ordered, 3) == std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}, {0, 1}});
}

TEST_CASE("restoring a state continues exactly as an uninterrupted sampler", "[sampler]") {
  EpochSampler reference(23, 4, true, 11);  // 5 batches per epoch
  const auto expected = take(reference, 17);
  for (int taken : {0, 2, 5, 6, 10, 15}) {  // mid-epoch and epoch boundaries
    CAPTURE(taken);
    EpochSampler first(23, 4, true, 11);
    take(first, taken);
    const SamplerState saved = first.state();
    EpochSampler resumed(23, 4, true, 11);
    resumed.restore(saved);
    const auto rest = take(resumed, 17 - taken);
    CHECK(rest == std::vector<std::vector<int64_t>>(expected.begin() + taken, expected.end()));
  }
  // Both forms of an epoch boundary give the same next batch.
  EpochSampler end_of_epoch(23, 4, true, 11);
  end_of_epoch.restore({0, 5});
  EpochSampler start_of_next(23, 4, true, 11);
  start_of_next.restore({1, 0});
  CHECK(end_of_epoch.next() == start_of_next.next());
}

TEST_CASE("sampler errors", "[sampler]") {
  CHECK_THROWS_WITH(EpochSampler(3, 4, true, 1), Catch::Contains("larger than the dataset"));
  CHECK_THROWS_AS(EpochSampler(3, 0, true, 1), rlcore::ValueError);
  EpochSampler sampler(10, 5, true, 1);
  CHECK_THROWS_AS(sampler.restore({0, 3}), rlcore::ValueError);
  CHECK_THROWS_AS(sampler.restore({-1, 0}), rlcore::ValueError);
}
