// Private to the core: the controller's side of verl's reward model
// (reward.reward_model): the text each response is scored on, and the scores
// the `reward_model` workers return for it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rlcore/batch.h"
#include "rlcore/core/chat/chat_template.h"
#include "rlcore/core/data/dataset.h"
#include "rlcore/core/config/run_config.h"
#include "rlcore/core/runtime/worker_group.h"
#include "rlcore/tokenizer/tokenizer.h"
#include "trainer/rewards.h"

namespace rlcore::trainer {

class RewardModel {
 public:
  // Reads the checkpoint's tokenizer and chat template. Throws ValueError naming
  // the checkpoint when it is not a sequence classifier with one label and a
  // `score` head.
  RewardModel(const config::RewardModelConfig& config, const Tokenizer& policy_tokenizer);

  // The ids the model reads for a prompt and its decoded response, as verl's
  // reward loop builds them: the checkpoint's chat template over the prompt's
  // messages plus the response as the assistant's turn (no generation prompt),
  // a leading bos text removed, tokenized as HF's encode. A checkpoint without a
  // chat template reads the policy's prompt text followed by the response.
  std::vector<int32_t> input_ids(const data::Example& example, const std::string& response) const;

  // The workers' score of each row of `sequences` (the engine layout;
  // `examples[i]` is row i's prompt).
  ModelScores score(runtime::WorkerGroup& group, const Batch& sequences,
                    const std::vector<const data::Example*>& examples) const;

 private:
  config::RewardModelConfig config_;
  const Tokenizer& policy_tokenizer_;
  Tokenizer tokenizer_;
  std::optional<chat::ChatTemplate> chat_template_;
};

}  // namespace rlcore::trainer
