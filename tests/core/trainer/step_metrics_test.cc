// A step's data metrics under verl's names, checked on a hand-made batch.
#include "../../../core/src/trainer/step_metrics.h"
#include "trainer_testing.h"

#include "rlcore/train_engine.h"

using namespace rlcore;
using namespace rlcore::trainer;

TEST_CASE("scores, advantages and lengths are summarised as verl does") {
  Batch batch(2);
  batch.set(columns::kResponseMask, at::tensor({1.0f, 1.0f, 0.0f, 1.0f, 1.0f, 1.0f}).view({2, 3}));
  batch.set(columns::kAttentionMask, at::tensor(std::vector<int64_t>{1, 1, 1, 1, 0, 0, 1, 1, 1, 1}).view({2, 5}));
  batch.set("token_level_scores", at::tensor({0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f}).view({2, 3}));
  batch.set("token_level_rewards", at::tensor({0.0f, 0.5f, 0.0f, 0.0f, 0.0f, 0.0f}).view({2, 3}));
  batch.set("advantages", at::tensor({1.0f, 1.0f, 9.0f, -1.0f, -1.0f, -1.0f}).view({2, 3}));
  batch.set("returns", at::tensor({1.0f, 1.0f, 9.0f, -1.0f, -1.0f, -1.0f}).view({2, 3}));
  const StepMetrics m = data_metrics(batch);
  CHECK(m.at("critic/score/mean") == Approx(0.5));
  CHECK(m.at("critic/score/max") == Approx(1.0));
  CHECK(m.at("critic/rewards/mean") == Approx(0.25));
  CHECK(m.at("critic/advantages/max") == Approx(1.0));  // the 9 is padding
  CHECK(m.at("critic/advantages/mean") == Approx(-0.2));
  CHECK(m.at("response_length/mean") == Approx(2.5));
  CHECK(m.at("response_length/clip_ratio") == Approx(0.5));
  CHECK(m.at("prompt_length/mean") == Approx(1.5));  // 4 - 2 and 4 - 3
  const StepMetrics perf = throughput_metrics(batch, 2.0, 2);
  CHECK(perf.at("perf/total_num_tokens") == Approx(8));
  CHECK(perf.at("perf/throughput") == Approx(2.0));
}
