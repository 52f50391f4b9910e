// The train engines' keys of each role (see engine_options.h).
#include "rlcore/core/config/engine_options.h"

#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "rlcore/registry.h"

namespace rlcore::config {
namespace {

// A copy of a section's engine keys ({} when it has none).
ConfigNode engine_keys(const ConfigNode& section, const std::string& path) {
  return section.defined() && !section.is_null() ? section.clone() : ConfigNode::parse("{}", path);
}

// model.use_remove_padding: false turns the engine's packing off.
ConfigNode with_remove_padding(ConfigNode options, bool use_remove_padding, const std::string& model_key,
                               const std::string& section) {
  if (use_remove_padding) return options;
  if (options.has("use_remove_padding") && options["use_remove_padding"].as<bool>()) {
    throw ConfigError("use_remove_padding is set twice: " + model_key + " = false and " + section +
                      ".use_remove_padding = true; keep one");
  }
  options.set("use_remove_padding", "false", model_key);
  return options;
}

}  // namespace

ConfigNode ref_engine_options(const ActorRolloutRefConfig& config) {
  ConfigNode options = with_remove_padding(engine_keys(config.ref.engine_options, "actor_rollout_ref.ref"),
                                           config.model.use_remove_padding,
                                           "actor_rollout_ref.model.use_remove_padding", "actor_rollout_ref.ref");
  // verl's ref.ulysses_sequence_parallel_size defaults to the actor's: they share the workers.
  const char* kSp = "ulysses_sequence_parallel_size";
  const ConfigNode& actor = config.actor.engine_options;
  if (!options.has(kSp) && actor.defined() && actor.has(kSp) && config.ref.strategy == config.actor.strategy)
    options.set(kSp, std::to_string(actor[kSp].as<int64_t>()), "actor_rollout_ref.actor." + std::string(kSp));
  return options;
}

ConfigNode critic_engine_options(const CriticConfig& config) {
  return with_remove_padding(engine_keys(config.engine_options, "critic"), config.model.use_remove_padding,
                             "critic.model.use_remove_padding", "critic");
}

ConfigNode actor_engine_options(const ActorRolloutRefConfig& config) {
  ConfigNode options = with_remove_padding(engine_keys(config.actor.engine_options, "actor_rollout_ref.actor"),
                                           config.model.use_remove_padding,
                                           "actor_rollout_ref.model.use_remove_padding", "actor_rollout_ref.actor");
  const ActorModelConfig& model = config.model;
  if (!model.lora()) return options;
  if (options.has("lora"))
    throw ConfigError(
        "LoRA is set twice: actor_rollout_ref.model.lora_rank / lora_adapter_path (verl's keys) and "
        "actor_rollout_ref.actor.lora; keep one");
  const std::string source = "actor_rollout_ref.model";
  options.set("lora.lora_rank", std::to_string(model.lora_rank), source);
  options.set("lora.lora_alpha", nlohmann::json(model.lora_alpha).dump(), source);
  options.set("lora.target_modules", nlohmann::json(model.target_modules).dump(), source);
  if (!model.exclude_modules.empty())
    options.set("lora.exclude_modules", nlohmann::json(model.exclude_modules).dump(), source);
  if (!model.lora_adapter_path.empty())
    options.set("lora.lora_adapter_path", nlohmann::json(model.lora_adapter_path).dump(), source);
  return options;
}

std::string weight_adaptor_for(const ActorRolloutRefConfig& config, const Registry& registry) {
  if (!config.hybrid_engine.weight_adaptor.empty()) return config.hybrid_engine.weight_adaptor;
  return registry.find("weight_adaptor", config.actor.strategy) ? config.actor.strategy : "identity";
}

}  // namespace rlcore::config
