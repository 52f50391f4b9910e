// Rule rewards of generated responses (see trainer/rewards.h).
#include "trainer/rewards.h"

#include <cmath>
#include <limits>

#include <ATen/ATen.h>

#include "rlcore/train_engine.h"
#include "trainer/sequences.h"

namespace rlcore::trainer {

std::string decode_known(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  std::vector<int32_t> known;
  known.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && id < tokenizer.vocab_size()) known.push_back(id);
  }
  return tokenizer.decode_lossy(known, /*skip_special_tokens=*/true);
}

Rewards compute_rewards(const Batch& sequences, const std::vector<const Example*>& examples, const Tokenizer& tokenizer,
                        const RewardRouter& router) {
  const std::vector<std::vector<int32_t>> responses = response_tokens(sequences);
  const int64_t rows = sequences.size();
  Rewards rewards;
  rewards.token_level_scores = at::zeros(sequences.tensor(columns::kResponses).sizes(), at::kFloat);
  std::vector<RewardSample> samples(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    rewards.responses.push_back(decode_known(tokenizer, responses[i]));
    samples[i].response = rewards.responses.back();
    samples[i].ground_truth = examples[i]->ground_truth;
    samples[i].data_source = examples[i]->data_source;
    samples[i].extra = &examples[i]->extra_info;
  }
  const std::vector<GradeResult> grades = router.score(samples);
  auto scores_a = rewards.token_level_scores.accessor<float, 2>();
  for (int64_t i = 0; i < rows; ++i) {
    const GradeResult& grade = grades[i];
    rewards.scores.push_back(grade.score);
    const auto length = static_cast<int64_t>(responses[i].size());
    if (length > 0) scores_a[i][length - 1] = static_cast<float>(grade.score);
    for (const auto& [name, value] : grade.extras) {
      auto& column = rewards.extras[name];
      column.resize(static_cast<size_t>(rows), std::numeric_limits<double>::quiet_NaN());
      column[i] = value;
    }
  }
  return rewards;
}

}  // namespace rlcore::trainer
