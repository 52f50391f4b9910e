// The core's own config keys (verl's names where the concept is the same) and
// resolution of a full run config: YAML file + overrides, validated against the
// core schema and against the options of every component it selects.
#pragma once

#include <string>
#include <vector>

#include "rlcore/config_node.h"
#include "rlcore/core/data/dataset.h"
#include "rlcore/core/runtime/runtime_config.h"
#include "rlcore/core/trainer/trainer_config.h"
#include "rlcore/export.h"
#include "rlcore/options.h"
#include "rlcore/registry.h"

namespace rlcore::config {

struct TrainerConfig {
  std::string project_name = "rlcore";
  std::string experiment_name = "default";
  // Empty means runs/<project_name>/<experiment_name>.
  std::string default_local_dir;
  std::vector<std::string> logger = {"console"};
  std::string log_level = "info";
  int64_t total_epochs = 1;
  int64_t total_training_steps = 0;  // 0: total_epochs x steps per epoch
  int64_t test_freq = -1;            // validate every N steps (and at the end); -1: never
  int64_t save_freq = -1;            // checkpoint every N steps (and at the end); -1: never
  bool val_before_train = true;
  bool val_only = false;             // validate once, then stop without training
  double stop_at_val_reward = 0.0;   // stop after a validation whose val-core reward reaches it; 0: never
  bool balance_batch = true;         // reorder each batch so the actor's dp ranks get even work (verl's)
  std::string resume_mode = "auto";  // auto | disable | resume_path
  std::string resume_from_path;      // resume_path: a global_step_N checkpoint directory
  int64_t max_ckpt_to_keep = 0;      // 0: keep all
  std::string rollout_data_dir;      // "": off; else each step's responses as <dir>/<step>.jsonl
  std::string validation_data_dir;   // "": off; else each validation's responses as <dir>/<step>.jsonl
  std::string device = "auto";       // auto | cpu | cuda: each worker binds cuda:<its local rank>
  // The default pool's size, verl's names for runtime.nnodes / runtime.n_workers_per_node:
  // resolve_config makes each pair equal (one set: it wins; both set and different: an error).
  int64_t nnodes = 1;
  int64_t n_gpus_per_node = 1;
};

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

struct RunConfig {
  TrainerConfig trainer;
  data::DataConfig data;
  trainer::ActorRolloutRefConfig actor_rollout_ref;
  trainer::CriticConfig critic;
  trainer::AlgorithmConfig algorithm;
  RewardConfig reward;
  runtime::RuntimeConfig runtime;  // workers: launcher, control plane, resource pools
  trainer::AsyncTrainingConfig async_training;
  trainer::RolloutPoolConfig rollout;  // the standalone rollout pool (async_training.mode: one_step_off)

  std::string run_dir() const;
};

RLCORE_API const OptionsSchema<RunConfig>& run_config_schema();

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
