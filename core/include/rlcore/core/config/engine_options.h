// What each role's train engine and the hybrid engine are given: a section's
// engine keys joined with the keys verl keeps elsewhere (model.lora_*,
// model.use_remove_padding, the actor's sequence-parallel size).
#pragma once

#include <string>

#include "rlcore/config_node.h"
#include "rlcore/core/config/actor_rollout_ref_config.h"
#include "rlcore/core/config/critic_config.h"
#include "rlcore/export.h"
#include "rlcore/registry.h"

namespace rlcore::config {

// The actor train engine's keys: actor_rollout_ref.actor's engine keys, plus
// verl's model.lora_rank / lora_alpha / target_modules / exclude_modules /
// lora_adapter_path as `lora` when LoRA is on (model.lora()).
// Throws ConfigError when LoRA is set under both names.
// Also use_remove_padding: false when model.use_remove_padding is false
// (ConfigError when the engine's own key says true).
RLCORE_API ConfigNode actor_engine_options(const ActorRolloutRefConfig& config);
// The reference's and the critic's train-engine keys, with use_remove_padding
// as the actor's; the reference's ulysses_sequence_parallel_size defaults to
// the actor's (verl's default) when both use the same engine.
RLCORE_API ConfigNode ref_engine_options(const ActorRolloutRefConfig& config);
RLCORE_API ConfigNode critic_engine_options(const CriticConfig& config);

// The weight adaptor the hybrid engine uses: hybrid_engine.weight_adaptor when
// set, else the one registered under the actor's engine name (a train engine
// whose tensors are not HF-named ships an adaptor of its own name, as megatron
// does), else identity (HF-named trainers such as fsdp).
RLCORE_API std::string weight_adaptor_for(const ActorRolloutRefConfig& config, const Registry& registry);

}  // namespace rlcore::config
