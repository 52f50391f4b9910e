// Schema and validation of algorithm (see algorithm_config.h).
#include "rlcore/core/config/algorithm_config.h"

#include "rlcore/error.h"
#include "rlcore/rl_functional.h"

namespace rlcore::config {
namespace {

OptionsSchema<FilterGroupsConfig> filter_groups_schema() {
  OptionsSchema<FilterGroupsConfig> schema;
  schema
      .key("enable", &FilterGroupsConfig::enable,
           "DAPO dynamic sampling: drop prompt groups whose responses all score the same, and generate more "
           "batches until data.train_batch_size prompts remain.")
      .key("metric", &FilterGroupsConfig::metric,
           "What must differ within a group: 'reward' (the score, overlong shaping included) or a grader extra "
           "(e.g. acc).")
      .key("max_num_gen_batches", &FilterGroupsConfig::max_num_gen_batches,
           "Generation batches per step at most before the step fails; <= 0: no limit.");
  return schema;
}

OptionsSchema<RolloutCorrectionSection> rollout_correction_schema() {
  OptionsSchema<RolloutCorrectionSection> schema;
  schema
      .key("rollout_is", &RolloutCorrectionSection::rollout_is,
           "Importance weights pi_train / pi_rollout for the loss: token or sequence level; empty: off.",
           one_of({"", "token", "sequence"}))
      .key("rollout_is_threshold", &RolloutCorrectionSection::rollout_is_threshold,
           "U: truncate the weights at U (TIS); \"L_U\": zero weights outside [L, U] (IcePop).")
      .key("rollout_is_batch_normalize", &RolloutCorrectionSection::rollout_is_batch_normalize,
           "Divide the weights by their batch mean.")
      .key("rollout_rs", &RolloutCorrectionSection::rollout_rs,
           "Rejection sampling: comma-separated token_k1..k3, seq_sum_k1..k3, seq_mean_k1..k3, seq_max_k2/k3; "
           "empty: off.")
      .key("rollout_rs_threshold", &RolloutCorrectionSection::rollout_rs_threshold,
           "One threshold for every rollout_rs option, or one per option (comma-separated; k1: \"L_U\" or U).")
      .key("bypass_mode", &RolloutCorrectionSection::bypass_mode,
           "verl's bypass mode (old log-probs replaced by the rollout's): not supported, must be false.")
      .key("loss_type", &RolloutCorrectionSection::loss_type, "bypass_mode's loss (unused while bypass_mode is off).",
           one_of({"ppo_clip", "reinforce"}));
  return schema;
}

}  // namespace

OptionsSchema<AlgorithmConfig> algorithm_schema() {
  OptionsSchema<AlgorithmConfig> schema;
  schema
      .key("adv_estimator", &AlgorithmConfig::adv_estimator,
           "Advantage estimator (a registered advantage_estimator: gae, grpo, rloo, ...); its options live here too.")
      .key("use_kl_in_reward", &AlgorithmConfig::use_kl_in_reward, "Subtract beta * KL(actor || ref) from rewards.")
      .key("kl_penalty", &AlgorithmConfig::kl_penalty, "KL estimator of the in-reward penalty.",
           one_of(kl_penalty_types()))
      .section("kl_ctrl", &AlgorithmConfig::kl_ctrl, kl_control_schema())
      .section("filter_groups", &AlgorithmConfig::filter_groups, filter_groups_schema())
      .section("rollout_correction", &AlgorithmConfig::rollout_correction, rollout_correction_schema())
      .other_keys_to(&AlgorithmConfig::estimator_options);
  return schema;
}

// Rollout correction settings verl would refuse mid-run are refused here.
void validate(const AlgorithmConfig& config) {
  const RolloutCorrectionSection& section = config.rollout_correction;
  if (section.bypass_mode) {
    throw ConfigError(
        "algorithm.rollout_correction.bypass_mode: rlcore has no bypass mode (the trainer always recomputes "
        "old log-probs); use rollout_is / rollout_rs, which correct against the rollout's log-probs");
  }
  validate_rollout_correction_config(section.settings(), "algorithm.rollout_correction");
}

}  // namespace rlcore::config
