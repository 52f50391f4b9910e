// The core's built-in advantage estimators and policy losses, under verl's
// names, registered like plugin components with origin plugin "core".
#pragma once

#include "rlcore/export.h"
#include "rlcore/registry.h"

namespace rlcore::algorithms {

// Adds advantage_estimator gae, grpo, rloo, opo, gpg, reinforce_plus_plus,
// reinforce_plus_plus_baseline, remax and policy_loss vanilla, gspo, cispo,
// gpg, clip_cov, kl_cov. Throws PluginError if any name is already taken.
RLCORE_API void register_builtin_algorithms(Registry& registry);

}  // namespace rlcore::algorithms
