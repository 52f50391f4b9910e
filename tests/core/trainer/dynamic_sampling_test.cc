// DAPO's dynamic sampling (algorithm.filter_groups) and overlong shaping
// (reward.overlong_buffer), as verl's DAPO trainer and reward manager do them.
#include "trainer/dynamic_sampling.h"
#include "../../common/run_config_testing.h"

#include <cmath>

#include "workers/sequences.h"
#include "rlcore/train_engine.h"

using namespace rlcore;
using namespace rlcore::trainer;
using rlcore_test::error_of;

namespace {

const data::Example kExamples[4] = {};

// A scored rollout of `groups` prompts x `n` responses with the given scores,
// prompts of `prompt_width` tokens (first token = the row's global id) and
// responses of 3 tokens; grader extra "acc" = score > 0.
ScoredRollout make_scored(int64_t groups, int64_t n, const std::vector<double>& scores, int64_t prompt_width,
                          int64_t first_id) {
  const int64_t rows = groups * n;
  ScoredRollout scored;
  Batch& batch = scored.rollout.batch;
  const int64_t width = prompt_width + 3;
  at::Tensor ids = at::full({rows, width}, 7, at::kLong);
  for (int64_t row = 0; row < rows; ++row) ids[row][0] = first_id + row;
  batch.set(columns::kInputIds, ids);
  batch.set(columns::kAttentionMask, at::ones({rows, width}, at::kLong));
  batch.set(columns::kPositionIds, at::arange(width).repeat({rows, 1}));
  batch.set(columns::kResponses, at::full({rows, 3}, 7, at::kLong));
  batch.set(columns::kResponseMask, at::ones({rows, 3}));
  std::vector<int64_t> uid;
  for (int64_t row = 0; row < rows; ++row) uid.push_back(row / n);
  batch.set("uid", at::tensor(uid, at::kLong));
  scored.rewards.token_level_scores = at::zeros({rows, 3});
  for (int64_t row = 0; row < rows; ++row) {
    scored.rollout.examples.push_back(&kExamples[row % 4]);
    scored.rewards.scores.push_back(scores[row]);
    scored.rewards.token_level_scores[row][2] = scores[row];
    scored.rewards.responses.push_back("r" + std::to_string(first_id + row));
    scored.rewards.extras["acc"].push_back(scores[row] > 0 ? 1.0 : 0.0);
  }
  return scored;
}

std::vector<int64_t> longs(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

}  // namespace

TEST_CASE("groups whose responses all score the same are dropped, single-response groups kept") {
  // Groups of 2 interleaved: uid 0 -> rows 0 and 3 (equal), 1 -> 1 and 4 (differ), 2 -> 2 and 5 (equal).
  const at::Tensor uid = at::tensor(std::vector<int64_t>{0, 1, 2, 0, 1, 2}, at::kLong);
  CHECK(rows_of_informative_groups(uid, {1, 0, 0.5, 1, 1, 0.5}) == std::vector<int64_t>{1, 4});
  CHECK(rows_of_informative_groups(uid, {1, 1, 1, 1, 1, 1}).empty());
  // A group of one response has nothing to compare (verl keeps it: len(values) > 1 is required to drop).
  CHECK(rows_of_informative_groups(at::tensor(std::vector<int64_t>{4, 5, 5}, at::kLong), {0, 1, 1}) ==
        std::vector<int64_t>{0});
}

TEST_CASE("the filter metric is the score or a grader extra, and a missing extra names what graders report") {
  const ScoredRollout scored = make_scored(1, 2, {0.0, 0.5}, 2, 0);
  CHECK(filter_metric(scored.rewards, "reward") == std::vector<double>{0.0, 0.5});
  CHECK(filter_metric(scored.rewards, "acc") == std::vector<double>{0.0, 1.0});
  CHECK_THAT(error_of<ConfigError>([&] { filter_metric(scored.rewards, "seq_reward"); }),
             Catch::Contains("algorithm.filter_groups.metric is 'seq_reward'") && Catch::Contains("reward, acc"));
  Rewards partial = scored.rewards;
  partial.extras["acc"][1] = std::nan("");
  CHECK_THAT(error_of<ConfigError>([&] { filter_metric(partial, "acc"); }),
             Catch::Contains("did not report it for every response"));
}

TEST_CASE("kept groups of several generation batches become one batch of exactly the groups asked for") {
  // Batch 1: prompts of width 2, groups 0 (informative) and 1 (not); batch 2: width 4, both informative.
  const ScoredRollout first = make_scored(2, 2, {0, 1, 1, 1}, 2, 0);
  const ScoredRollout second = make_scored(2, 2, {1, 0, 0, 1}, 4, 100);
  std::vector<ScoredRollout> kept;
  for (const ScoredRollout* part : {&first, &second}) {
    kept.push_back(select_rows(
        *part, rows_of_informative_groups(part->rollout.batch.tensor("uid"), filter_metric(part->rewards, "reward"))));
  }
  REQUIRE(count_groups(kept[0].rollout.batch.tensor("uid")) == 1);
  const ScoredRollout out = concat_groups(kept, /*max_groups=*/2, /*pad_id=*/9);

  const Batch& batch = out.rollout.batch;
  REQUIRE(batch.size() == 4);  // the third informative group is cut, as verl keeps train_batch_size prompts
  CHECK(longs(batch.tensor("uid")) == std::vector<int64_t>{0, 0, 1, 1});
  // Rows 0, 1 of batch 1, then rows 100, 101 of batch 2; the narrower prompts are left-padded.
  const at::Tensor ids = batch.tensor(columns::kInputIds);
  REQUIRE(ids.size(1) == 7);
  CHECK(longs(ids[0]) == std::vector<int64_t>{9, 9, 0, 7, 7, 7, 7});
  CHECK(longs(ids[2]) == std::vector<int64_t>{100, 7, 7, 7, 7, 7, 7});
  CHECK(longs(batch.tensor(columns::kAttentionMask)[1]) == std::vector<int64_t>{0, 0, 1, 1, 1, 1, 1});
  CHECK(longs(batch.tensor(columns::kPositionIds)[1]) == std::vector<int64_t>{0, 0, 0, 1, 2, 3, 4});
  // Rewards follow their rows.
  CHECK(out.rewards.scores == std::vector<double>{0, 1, 1, 0});
  CHECK(out.rewards.responses == std::vector<std::string>{"r0", "r1", "r100", "r101"});
  CHECK(out.rewards.extras.at("acc") == std::vector<double>{0, 1, 1, 0});
  CHECK(out.rewards.token_level_scores.sum(1).to(at::kDouble).equal(at::tensor({0.0, 1.0, 1.0, 0.0}, at::kDouble)));
  CHECK(out.rollout.examples.size() == 4);
}

TEST_CASE("overlong shaping: no penalty before the buffer, then linear down to -penalty_factor") {
  OverlongShaping shaping;
  shaping.buffer.enable = true;
  shaping.buffer.len = 4;
  shaping.buffer.penalty_factor = 0.5;
  shaping.max_response_length = 20;
  // verl: expected_len = 20 - 4 = 16; overlong_reward = min(-(length - 16) / 4 * 0.5, 0).
  CHECK(shaping.reward(10) == 0.0);
  CHECK(shaping.reward(16) == 0.0);
  CHECK(shaping.reward(17) == Approx(-0.125));
  CHECK(shaping.reward(20) == Approx(-0.5));
}
