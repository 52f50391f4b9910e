// actor_rollout_ref.model and critic.model: the checkpoint a role starts from,
// with verl's LoRA keys on the actor's (handed to its train engine as `lora`,
// see engine_options.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rlcore/export.h"
#include "rlcore/options.h"

namespace rlcore::config {

struct ModelPathConfig {
  std::string path;  // HF checkpoint directory (config.json, weights, tokenizer)
  // false: the train engine pads micro-batches instead of packing them (its use_remove_padding).
  bool use_remove_padding = true;
};

struct ActorModelConfig {
  std::string path;
  int64_t lora_rank = 0;  // 0: LoRA off (unless lora_adapter_path is set)
  double lora_alpha = 16;
  std::vector<std::string> target_modules = {"all-linear"};
  std::vector<std::string> exclude_modules;
  std::string lora_adapter_path;  // a PEFT adapter to start from; LoRA is on with its rank
  // false: the actor's and the reference's train engines pad micro-batches
  // instead of packing them (their use_remove_padding).
  bool use_remove_padding = true;

  bool lora() const { return lora_rank > 0 || !lora_adapter_path.empty(); }
};

// critic.model's keys; `doc` says what an empty path means for the role.
RLCORE_API OptionsSchema<ModelPathConfig> model_path_schema(const std::string& doc);
RLCORE_API OptionsSchema<ActorModelConfig> actor_model_schema();

}  // namespace rlcore::config
