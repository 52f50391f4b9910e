// A run's whole config: its sections (one file each beside this one; verl's
// names where the concept is the same), the checks that span sections, and
// resolution: YAML file + overrides, validated against the core schema and
// against the options of every component it selects.
#pragma once

#include <string>
#include <vector>

#include "rlcore/config_node.h"
#include "rlcore/core/config/actor_rollout_ref_config.h"
#include "rlcore/core/config/algorithm_config.h"
#include "rlcore/core/config/async_training_config.h"
#include "rlcore/core/config/critic_config.h"
#include "rlcore/core/config/data_config.h"
#include "rlcore/core/config/reward_config.h"
#include "rlcore/core/config/runtime_config.h"
#include "rlcore/core/config/trainer_config.h"
#include "rlcore/export.h"
#include "rlcore/options.h"
#include "rlcore/registry.h"

namespace rlcore::config {

struct RunConfig {
  TrainerConfig trainer;
  DataConfig data;
  ActorRolloutRefConfig actor_rollout_ref;
  CriticConfig critic;
  AlgorithmConfig algorithm;
  RewardConfig reward;
  RuntimeConfig runtime;  // workers: launcher, control plane, resource pools
  AsyncTrainingConfig async_training;
  RolloutPoolConfig rollout;  // the standalone rollout pool (async_training.mode: one_step_off)

  std::string run_dir() const;
};

RLCORE_API const OptionsSchema<RunConfig>& run_config_schema();

// Each section's own checks, then those that span sections (the asynchronous
// modes against what a step generates by itself). Throws ConfigError.
RLCORE_API void validate(const RunConfig& config);

// Where a component's options live in the config tree.
RLCORE_API std::string component_options_path(const std::string& kind, const std::string& name);

// The keys of `algorithm` that advantage estimator `estimator` reads. As in
// verl, the section carries every estimator's keys (gamma and lam for gae,
// norm_adv_by_std_in_grpo for grpo, ...) and each estimator reads its own:
// keys another registered estimator declares are left out; any other key is
// kept, so the estimator's validation names it as unknown.
RLCORE_API ConfigNode estimator_options(const Registry& registry, const std::string& estimator,
                                        const ConfigNode& options);

struct ResolvedConfig {
  ConfigNode tree;  // with defaults of the core keys filled in
  RunConfig config;
  // One line per verl key that has no effect in rlcore (docs/user-guide.md#verl-keys),
  // for the commands to show; such keys are gone from `tree`.
  std::vector<std::string> notes;
};

// Loads `config_file` (none when empty), applies `overrides`, handles verl's keys
// that rlcore has no key for (config/verl_keys.h), validates every key
// (core and selected components) and fills in defaults. Components of the
// trainer sections (engines, estimator, policy loss) are validated when the
// config has that section. Throws ConfigError or PluginError naming the key
// and where it came from.
RLCORE_API ResolvedConfig resolve_config(const Registry& registry, const std::string& config_file,
                                         const std::vector<std::string>& overrides);

}  // namespace rlcore::config
