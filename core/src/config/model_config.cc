// Schemas of actor_rollout_ref.model and critic.model (see model_config.h).
#include "rlcore/core/config/model_config.h"

namespace rlcore::config {
namespace {

constexpr const char* kUseRemovePaddingDoc =
    "Train-engine micro-batches packed without padding (each row's real tokens back to back, attention kept "
    "within each row): the padded path's numbers without its compute. Sets the engine's use_remove_padding "
    "when false (the engines' default is true; docs/trainer.md#packing).";

}  // namespace

OptionsSchema<ModelPathConfig> model_path_schema(const std::string& doc) {
  OptionsSchema<ModelPathConfig> schema;
  schema.key("path", &ModelPathConfig::path, doc)
      .key("use_remove_padding", &ModelPathConfig::use_remove_padding, kUseRemovePaddingDoc);
  return schema;
}

OptionsSchema<ActorModelConfig> actor_model_schema() {
  OptionsSchema<ActorModelConfig> schema;
  schema.key("path", &ActorModelConfig::path, "HF checkpoint directory the actor, reference and rollout start from.")
      .key("lora_rank", &ActorModelConfig::lora_rank,
           "LoRA rank r; 0 trains the whole model. > 0 freezes the base weights and trains rank-r adapters "
           "(handed to the actor's train engine as its lora options; the engine needs the low_rank_adapters "
           "capability).",
           at_least(0))
      .key("lora_alpha", &ActorModelConfig::lora_alpha,
           "LoRA alpha: adapter outputs are scaled by lora_alpha / lora_rank.", greater_than(0))
      .key("target_modules", &ActorModelConfig::target_modules,
           "Projections that get adapters: all-linear (every projection of every decoder layer), module names "
           "(q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj) or regular expressions over full module "
           "names (model.layers.0.self_attn.q_proj).",
           {}, read_one_or_many)
      .key("exclude_modules", &ActorModelConfig::exclude_modules,
           "Modules taken out of target_modules, in the same forms (e.g. down_proj, or '.*layers\\.0\\..*'); an "
           "entry that selects no module is an error.",
           {}, read_one_or_many)
      .key("lora_adapter_path", &ActorModelConfig::lora_adapter_path,
           "A PEFT adapter directory to continue training from (e.g. `rlcore sft`'s hf/lora_adapter): turns LoRA "
           "on with the adapter's r, lora_alpha and modules (lora_rank, when set, must agree). The reference "
           "policy stays the base model, as in verl.")
      .key("use_remove_padding", &ActorModelConfig::use_remove_padding,
           std::string(kUseRemovePaddingDoc) + " Applies to the actor and the reference policy.");
  return schema;
}

}  // namespace rlcore::config
