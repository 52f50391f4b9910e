// Private to the core: turning generated responses into rewards (verl's
// reward manager): decode, grade against each prompt's ground truth, and place
// the score on the response's last token.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "rlcore/batch.h"
#include "rlcore/core/data/dataset.h"
#include "rlcore/core/trainer/reward_router.h"
#include "rlcore/core/config/run_config.h"
#include "rlcore/tokenizer/tokenizer.h"

namespace rlcore::trainer {

struct Rewards {
  at::Tensor token_level_scores;                      // [B, R]: the score at each response's last token, 0 elsewhere
  std::vector<double> scores;                         // [B]
  std::vector<std::string> responses;                 // decoded, special tokens skipped
  std::map<std::string, std::vector<double>> extras;  // grader extras ("acc", ...) per row, NaN where absent
};

// DAPO's overlong shaping (reward.overlong_buffer) of responses limited to
// max_response_length tokens; disabled by default.
struct OverlongShaping {
  config::OverlongBufferConfig buffer;
  int64_t max_response_length = 0;

  // The penalty (<= 0) of a response of `length` tokens: -penalty_factor times
  // how far into the buffer it reaches, as a fraction of the buffer.
  double reward(int64_t length) const;
};

// The shaping a run's config asks for (reward.overlong_buffer, data.max_response_length).
OverlongShaping overlong_shaping(const config::RunConfig& config);

// A reward model's score of each row (trainer/reward_model.h) and how it meets
// the rule grades (reward.reward_model.combine).
struct ModelScores {
  std::vector<double> scores;  // [B]
  bool replace = true;         // true: the rule graders are not asked; false: added to their grade
};

// `examples[i]` is the prompt of row i of `sequences` (the engine layout). A
// response's score is its grade (or, with `model`, the model's score, or both
// added), plus the overlong penalty when shaping is on. With `model`, the
// extras gain rm_score. `extra_info[i]` (multi-turn rollouts: the prompt's
// plus the agent loop's __num_turns__, tool_rewards) replaces row i's prompt's
// extra_info for the graders where given.
Rewards compute_rewards(const Batch& sequences, const std::vector<const data::Example*>& examples,
                        const Tokenizer& tokenizer, const RewardRouter& router, const OverlongShaping& overlong = {},
                        const ModelScores* model = nullptr, const std::vector<nlohmann::json>* extra_info = nullptr);

// Decodes ids, dropping any the tokenizer does not know (a model's padded vocabulary).
std::string decode_known(const Tokenizer& tokenizer, const std::vector<int32_t>& ids);

}  // namespace rlcore::trainer
