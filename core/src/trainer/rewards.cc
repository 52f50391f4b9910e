// Rule rewards of generated responses (see trainer/rewards.h).
#include "trainer/rewards.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/ATen.h>

#include "rlcore/error.h"
#include "rlcore/train_engine.h"
#include "workers/sequences.h"

namespace rlcore::trainer {

std::string decode_known(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  std::vector<int32_t> known;
  known.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && id < tokenizer.vocab_size()) known.push_back(id);
  }
  return tokenizer.decode_lossy(known, /*skip_special_tokens=*/true);
}

double OverlongShaping::reward(int64_t length) const {
  const int64_t expected = max_response_length - buffer.len;
  const double exceed = static_cast<double>(length - expected);
  return std::min(-exceed / static_cast<double>(buffer.len) * buffer.penalty_factor, 0.0);
}

OverlongShaping overlong_shaping(const config::RunConfig& config) {
  return OverlongShaping{config.reward.overlong_buffer, config.data.max_response_length};
}

Rewards compute_rewards(const Batch& sequences, const std::vector<const data::Example*>& examples,
                        const Tokenizer& tokenizer, const RewardRouter& router, const OverlongShaping& overlong,
                        const ModelScores* model, const std::vector<nlohmann::json>* extra_info) {
  const std::vector<std::vector<int32_t>> responses = workers::response_tokens(sequences);
  const int64_t rows = sequences.size();
  Rewards rewards;
  rewards.token_level_scores = at::zeros(sequences.tensor(columns::kResponses).sizes(), at::kFloat);
  std::vector<RewardSample> samples(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    rewards.responses.push_back(decode_known(tokenizer, responses[i]));
    samples[i].response = rewards.responses.back();
    samples[i].ground_truth = examples[i]->ground_truth;
    samples[i].data_source = examples[i]->data_source;
    samples[i].extra = extra_info != nullptr ? &(*extra_info)[static_cast<size_t>(i)] : &examples[i]->extra_info;
  }
  const std::vector<GradeResult> grades =
      model != nullptr && model->replace ? std::vector<GradeResult>(samples.size()) : router.score(samples);
  if (model != nullptr && model->scores.size() != samples.size()) {
    throw ValueError("the reward model returned " + std::to_string(model->scores.size()) + " scores for " +
                     std::to_string(samples.size()) + " responses");
  }
  auto scores_a = rewards.token_level_scores.accessor<float, 2>();
  auto set_extra = [&rewards, rows](const std::string& name, int64_t row, double value) {
    auto& column = rewards.extras[name];
    column.resize(static_cast<size_t>(rows), std::numeric_limits<double>::quiet_NaN());
    column[row] = value;
  };
  for (int64_t i = 0; i < rows; ++i) {
    const GradeResult& grade = grades[i];
    const auto length = static_cast<int64_t>(responses[i].size());
    double score = grade.score;
    for (const auto& [name, value] : grade.extras) set_extra(name, i, value);
    if (model != nullptr) {
      score += model->scores[i];
      set_extra("rm_score", i, model->scores[i]);
    }
    if (overlong.buffer.enable) {
      const double penalty = overlong.reward(length);
      score += penalty;
      if (overlong.buffer.log) {
        set_extra("overlong_reward", i, penalty);
        set_extra("overlong", i, penalty < 0 ? 1.0 : 0.0);
      }
    }
    rewards.scores.push_back(score);
    if (length > 0) scores_a[i][length - 1] = static_cast<float>(score);
  }
  return rewards;
}

}  // namespace rlcore::trainer
