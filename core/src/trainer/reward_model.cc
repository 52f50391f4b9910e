// The reward model's inputs and scores (see trainer/reward_model.h).
#include "trainer/reward_model.h"

#include <filesystem>
#include <fstream>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"
#include "workers/sequences.h"
#include "workers/worker_contract.h"

namespace rlcore::trainer {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A one-label sequence classifier: what verl's reward model server scores with.
void check_checkpoint(const std::string& dir) {
  const std::filesystem::path config_file = std::filesystem::path(dir) / "config.json";
  std::ifstream in(config_file);
  if (!in) throw IoError(config_file.string() + ": cannot open (reward.reward_model.model_path)");
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(config_file.string() + ": not JSON: " + e.what());
  }
  bool classifier = false;
  for (const auto& name : config.value("architectures", nlohmann::json::array())) {
    classifier = classifier || (name.is_string() && ends_with(name.get<std::string>(), "ForSequenceClassification"));
  }
  if (!classifier) {
    throw ValueError(config_file.string() + ": a reward model must be a *ForSequenceClassification checkpoint, " +
                     "its architectures are " + config.value("architectures", nlohmann::json::array()).dump());
  }
  const auto labels = config.find("id2label");
  if (labels != config.end() && labels->is_object() && labels->size() != 1) {
    throw ValueError(config_file.string() + ": a reward model has one label (num_labels=1), this one has " +
                     std::to_string(labels->size()));
  }
  const SafetensorsCheckpoint weights(dir);
  if (!weights.contains("score.weight")) {
    throw ValueError("reward model '" + dir + "' has no tensor 'score.weight' (the classification head)");
  }
}

}  // namespace

RewardModel::RewardModel(const config::RewardModelConfig& config, const Tokenizer& policy_tokenizer)
    : config_(config),
      policy_tokenizer_(policy_tokenizer),
      tokenizer_((check_checkpoint(config.model_path), Tokenizer::from_pretrained_dir(config.model_path))),
      chat_template_(chat::ChatTemplate::from_checkpoint(config.model_path)) {}

std::vector<int32_t> RewardModel::input_ids(const data::Example& example, const std::string& response) const {
  std::string text;
  if (chat_template_) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::parse(example.prompt_messages.dump());
    messages.push_back({{"role", "assistant"}, {"content", response}});
    chat::ChatTemplateOptions options;
    options.add_generation_prompt = false;
    text = chat_template_->render(messages, options);
    // verl strips it because the server's tokenizer adds it again.
    if (const auto bos = tokenizer_.bos_token_id()) {
      const std::string bos_text = tokenizer_.id_to_token(*bos);
      if (text.rfind(bos_text, 0) == 0) text.erase(0, bos_text.size());
    }
  } else {
    text = policy_tokenizer_.decode_lossy(example.prompt_ids) + response;
  }
  return tokenizer_.post_process(tokenizer_.encode(text));
}

ModelScores RewardModel::score(runtime::WorkerGroup& group, const Batch& sequences,
                               const std::vector<const data::Example*>& examples) const {
  const std::vector<std::vector<int32_t>> responses = workers::response_tokens(sequences);
  std::vector<std::vector<int32_t>> inputs;
  for (size_t i = 0; i < responses.size(); ++i) {
    inputs.push_back(input_ids(*examples[i], decode_known(policy_tokenizer_, responses[i])));
  }
  const int64_t pad = tokenizer_.pad_token_id().value_or(tokenizer_.eos_token_id().value_or(0));
  const std::vector<std::vector<int32_t>> padding(inputs.size(), std::vector<int32_t>{static_cast<int32_t>(pad)});
  const Batch input = workers::make_supervised_batch(inputs, padding, pad);
  const Batch output = workers::call(group, workers::reward_model_methods::kComputeRmScore, input).get().batch;
  const at::Tensor scores = output.tensor(workers::kRmScores).to(at::kDouble).contiguous();
  ModelScores result;
  result.replace = config_.combine == "replace";
  result.scores.assign(scores.data_ptr<double>(), scores.data_ptr<double>() + scores.numel());
  return result;
}

}  // namespace rlcore::trainer
