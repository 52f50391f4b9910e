// The trainer's worker roles, built by `rlcore worker` from the run config the
// controller sends:
//   actor_rollout_ref: the actor's TrainEngine, the rollout's InferenceEngine
//     and (with a KL term) the frozen reference, colocated in one process;
//   critic: a TrainEngine with a value head;
//   reward_model: a frozen TrainEngine with a sequence classifier's score head;
//   rollout: an InferenceEngine alone, a standalone rollout pool (docs/async.md).
// Their methods are called by the RL and SFT trainers (rl_trainer.h).
#pragma once

#include "rlcore/core/runtime/role.h"
#include "rlcore/export.h"
#include "rlcore/registry.h"

namespace rlcore::workers {

// Role options (runtime::RoleSpec::options) the trainer roles read.
namespace role_options {
inline constexpr const char* kConfig = "config";             // the resolved run config, YAML text
inline constexpr const char* kWithRef = "with_ref";          // build the reference policy
inline constexpr const char* kWithRollout = "with_rollout";  // build the inference engine
inline constexpr const char* kTotalSteps = "total_training_steps";
inline constexpr const char* kModelPath = "model_path";  // overrides the config's model path
}  // namespace role_options

// Adds the role types "actor_rollout_ref", "critic", "reward_model" and "rollout"; engines are created
// from `components` (which must outlive the worker).
RLCORE_API void add_trainer_roles(runtime::RoleRegistry& roles, const Registry& components);

}  // namespace rlcore::workers
