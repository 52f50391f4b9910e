// Schema of reward (see reward_config.h).
#include "rlcore/core/config/reward_config.h"

namespace rlcore::config {

bool custom_reward_function_enabled(const RewardConfig& config) {
  const ConfigNode path = config.custom_reward_function["path"];
  return path.defined() && path.is_scalar() && !path.as<std::string>().empty();
}

OptionsSchema<RewardConfig> reward_schema() {
  OptionsSchema<OverlongBufferConfig> overlong;
  overlong
      .key("enable", &OverlongBufferConfig::enable,
           "DAPO's overlong shaping: penalize responses that reach into the last `len` tokens of "
           "data.max_response_length.")
      .key("len", &OverlongBufferConfig::len, "Length of the buffer, in tokens (> 0 when enabled).", at_least(0))
      .key("penalty_factor", &OverlongBufferConfig::penalty_factor, "Penalty of a response that uses the whole buffer.",
           at_least(0))
      .key("log", &OverlongBufferConfig::log, "Also report overlong_reward and overlong (critic/score_extra/*).");
  OptionsSchema<RewardModelConfig> reward_model;
  reward_model
      .key("enable", &RewardModelConfig::enable,
           "Score responses with a reward model (a sequence-classification checkpoint) instead of, or besides, "
           "the rule graders (docs/reward-model.md).")
      .key("model_path", &RewardModelConfig::model_path,
           "HF checkpoint of the reward model: *ForSequenceClassification with one label (a `score` head).")
      .key("strategy", &RewardModelConfig::strategy, "Train engine that runs its forward (frozen).")
      .key("micro_batch_size_per_gpu", &RewardModelConfig::micro_batch_size_per_gpu,
           "Responses per forward on one worker; 0: all at once.", at_least(0))
      .key("combine", &RewardModelConfig::combine,
           "replace: the model's score is the reward and the rule graders are not asked (verl); add: the rule "
           "grade plus the model's score.",
           one_of({"replace", "add"}));
  OptionsSchema<RewardConfig> reward;
  reward
      .key("grader", &RewardConfig::grader,
           "Grader for every sample, or 'auto' to pick one by each sample's data_source (verl's "
           "default_compute_score).")
      .subtree("graders", &RewardConfig::graders, "Options per grader: reward.graders.<name>.<key> (see below).")
      .section("overlong_buffer", &RewardConfig::overlong_buffer, overlong)
      .subtree("custom_reward_function", &RewardConfig::custom_reward_function,
               "verl's custom reward function: a Python file's compute_score run in a subprocess; path set: it "
               "scores every sample instead of reward.grader. Keys: path, name, python, timeout_s, reward_kwargs "
               "(docs/custom-rewards.md).")
      .section("reward_model", &RewardConfig::reward_model, reward_model);
  return reward;
}

}  // namespace rlcore::config
