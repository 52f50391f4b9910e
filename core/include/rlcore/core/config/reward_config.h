// reward: how responses are scored (rule graders, verl's custom reward
// function, a reward model) and DAPO's overlong shaping.
#pragma once

#include <cstdint>
#include <string>

#include "rlcore/config_node.h"
#include "rlcore/export.h"
#include "rlcore/options.h"

namespace rlcore::config {

// DAPO's overlong reward shaping (verl's DAPO reward manager): a response
// longer than data.max_response_length - len loses up to penalty_factor,
// linearly over the last `len` tokens.
struct OverlongBufferConfig {
  bool enable = false;
  int64_t len = 0;
  double penalty_factor = 1.0;
  bool log = false;  // also report overlong_reward and overlong as score extras
};

// verl's reward.reward_model: a sequence-classification checkpoint (HF
// *ForSequenceClassification, one label, a `score` head) that scores each
// prompt + response at its last token, served by a frozen train engine in the
// `reward_model` worker role (colocated, or in its own runtime.pools entry).
struct RewardModelConfig {
  bool enable = false;
  std::string model_path;
  std::string strategy = "fsdp";         // the train engine that runs the forward
  int64_t micro_batch_size_per_gpu = 0;  // rows per forward on one worker; 0: all at once
  std::string combine = "replace";       // replace: the model's score is the reward (verl) | add: rule + model
};

struct RewardConfig {
  std::string grader = "auto";
  ConfigNode graders;  // <grader name> -> that grader's options
  OverlongBufferConfig overlong_buffer;
  // verl's custom_reward_function: the options of the `custom_function` grader
  // (reward plugin); with a non-empty path it scores every sample.
  ConfigNode custom_reward_function;
  RewardModelConfig reward_model;
};

// The grader that runs reward.custom_reward_function (docs/custom-rewards.md).
inline constexpr const char* kCustomFunctionGrader = "custom_function";

// True when reward.custom_reward_function.path is set (non-empty).
RLCORE_API bool custom_reward_function_enabled(const RewardConfig& config);

RLCORE_API OptionsSchema<RewardConfig> reward_schema();

}  // namespace rlcore::config
