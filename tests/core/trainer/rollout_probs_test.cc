// The rollout's log-probs against the trainer's (trainer/rollout_probs.h):
// verl's probability differences, the count of tokens that differ at all, and
// trainer.check_exact_logprobs naming the first one.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include "rlcore/batch.h"
#include "rlcore/columns.h"
#include "rlcore/error.h"
#include "trainer/rollout_probs.h"

using namespace rlcore;

namespace {

Batch two_samples(const at::Tensor& rollout, const at::Tensor& trainer) {
  Batch batch(2);
  batch.set(columns::kResponseMask, at::tensor({1, 1, 1, 1, 1, 0}, at::kLong).view({2, 3}));
  batch.set(columns::kRolloutLogProbs, rollout);
  batch.set(columns::kOldLogProbs, trainer);
  batch.set(columns::kUid, at::tensor({7, 9}, at::kLong));
  return batch;
}

}  // namespace

TEST_CASE("rollout vs trainer log-probs: differences, mismatches, and the exact check", "[trainer][exact]") {
  const at::Tensor trainer = at::tensor({-1.0f, -2.0f, -0.5f, -0.25f, -3.0f, -4.0f}).view({2, 3});
  SECTION("equal on every response token (the masked one may differ): zero, and the check passes") {
    at::Tensor rollout = trainer.clone();
    rollout[1][2] = -9.0f;  // outside the response mask
    trainer::StepMetrics metrics;
    trainer::add_rollout_probs_diff(two_samples(rollout, trainer), metrics, /*check_exact=*/true, 4, 3);
    CHECK(metrics.at("training/rollout_probs_diff_max") == 0.0);
    CHECK(metrics.at("training/rollout_logprob_mismatches") == 0.0);
  }
  SECTION("one token differs by one ulp: counted, and the check names it") {
    at::Tensor rollout = trainer.clone();
    rollout[1][1] = std::nextafter(-3.0f, 0.0f);
    trainer::StepMetrics metrics;
    trainer::add_rollout_probs_diff(two_samples(rollout, trainer), metrics, /*check_exact=*/false, 4, 3);
    CHECK(metrics.at("training/rollout_logprob_mismatches") == 1.0);
    CHECK(metrics.at("training/rollout_probs_diff_max") > 0.0);
    CHECK_THROWS_WITH(trainer::add_rollout_probs_diff(two_samples(rollout, trainer), metrics, true, 4, 3),
                      Catch::Contains("trainer.check_exact_logprobs: step 4, sample 1 (prompt uid 9), response "
                                      "token 1: the rollout's log-prob -2.99999976 is not the trainer's -3 "
                                      "(weights version 3; 1 of the step's 5 compared response tokens differ)"));
  }
  SECTION("asynchronous rows: only those the trainer's weights version sampled whole are compared") {
    at::Tensor rollout = trainer.clone();
    rollout[0][0] = -1.5f;  // row 0: sampled by version 2, which the trainer no longer has
    Batch batch = two_samples(rollout, trainer);
    batch.set(trainer::kSampledByVersion, at::tensor({2, 3}, at::kLong));
    trainer::StepMetrics metrics;
    trainer::add_rollout_probs_diff(batch, metrics, /*check_exact=*/true, 4, 3);
    CHECK(metrics.at("training/rollout_logprob_compared") == 2.0);  // row 1's response tokens
    CHECK(metrics.at("training/rollout_logprob_mismatches") == 0.0);
    CHECK(metrics.at("training/rollout_probs_diff_max") > 0.0);             // verl's metric keeps every token
    batch.set(trainer::kSampledByVersion, at::tensor({3, -1}, at::kLong));  // row 1 spans versions
    CHECK_THROWS_WITH(trainer::add_rollout_probs_diff(batch, metrics, true, 4, 3),
                      Catch::Contains("sample 0 (prompt uid 7), response token 0"));
    CHECK(metrics.at("training/rollout_logprob_compared") == 3.0);
  }
}
