// Schemas of actor_rollout_ref and its hybrid_engine (see actor_rollout_ref_config.h).
#include "rlcore/core/config/actor_rollout_ref_config.h"

namespace rlcore::config {

OptionsSchema<HybridEngineConfig> hybrid_engine_schema() {
  OptionsSchema<HybridEngineConfig> schema;
  schema
      .key("weight_adaptor", &HybridEngineConfig::weight_adaptor,
           "Actor -> rollout layout (a weight_adaptor); empty: the one named like actor.strategy when a plugin "
           "registers it (megatron), else identity.")
      .key("offloader", &HybridEngineConfig::offloader, "Moves actor state to host during rollout (an offloader).")
      .other_keys_to(&HybridEngineConfig::options);
  return schema;
}

OptionsSchema<ActorRolloutRefConfig> actor_rollout_ref_schema() {
  OptionsSchema<ActorRolloutRefConfig> schema;
  schema.section("model", &ActorRolloutRefConfig::model, actor_model_schema())
      .section("actor", &ActorRolloutRefConfig::actor, actor_schema())
      .section("ref", &ActorRolloutRefConfig::ref, ref_schema())
      .section("rollout", &ActorRolloutRefConfig::rollout, rollout_schema())
      .section("hybrid_engine", &ActorRolloutRefConfig::hybrid_engine, hybrid_engine_schema());
  return schema;
}

}  // namespace rlcore::config
