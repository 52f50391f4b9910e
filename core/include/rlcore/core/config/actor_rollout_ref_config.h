// actor_rollout_ref: the roles that share the actor's workers (verl's hybrid
// engine): model, actor, ref, rollout, and the hybrid engine's parts.
#pragma once

#include <string>

#include "rlcore/config_node.h"
#include "rlcore/core/config/actor_config.h"
#include "rlcore/core/config/model_config.h"
#include "rlcore/core/config/ref_config.h"
#include "rlcore/core/config/rollout_config.h"
#include "rlcore/export.h"
#include "rlcore/options.h"

namespace rlcore::config {

// The hybrid engine's parts (see docs/hybrid-engine.md); `options` are the
// sharding manager's keys (offload_train_param, ...).
struct HybridEngineConfig {
  std::string weight_adaptor;  // empty: chosen by the actor's strategy (weight_adaptor_for)
  std::string offloader = "engine";
  ConfigNode options;
};

struct ActorRolloutRefConfig {
  ActorModelConfig model;
  ActorConfig actor;
  RefConfig ref;
  RolloutConfig rollout;
  HybridEngineConfig hybrid_engine;
};

RLCORE_API OptionsSchema<HybridEngineConfig> hybrid_engine_schema();
RLCORE_API OptionsSchema<ActorRolloutRefConfig> actor_rollout_ref_schema();

}  // namespace rlcore::config
