// How a run's batch sizes relate (see trainer/batch_plan.h and docs/trainer.md).
#include "trainer/batch_plan.h"

#include "rlcore/core/config/run_config.h"
#include "rlcore/error.h"
#include "rlcore/string_join.h"

namespace rlcore::trainer {
namespace {

std::string str(int64_t value) { return std::to_string(value); }

AdvantageNeeds estimator_needs(const config::RunConfig& config, const Registry& components) {
  const std::string& name = config.algorithm.adv_estimator;
  if (!components.find(AdvantageEstimator::kKind, name)) {
    throw ConfigError("algorithm.adv_estimator: '" + name + "' is not a registered advantage estimator; known: " +
                      join(components.names(AdvantageEstimator::kKind)));
  }
  return components
      .create<AdvantageEstimator>(name, config::estimator_options(components, name, config.algorithm.estimator_options))
      ->needs();
}

void check_mini_batches(const std::string& role, int64_t prompts_per_step, int64_t mini_batch_prompts, int64_t n,
                        int64_t workers, int64_t micro_batch, const std::string& micro_key, int64_t* rows_per_worker) {
  const std::string mini_key = role + ".ppo_mini_batch_size";
  if (prompts_per_step % mini_batch_prompts != 0) {
    throw ConfigError("data.train_batch_size (" + str(prompts_per_step) + ") must be a multiple of " + mini_key + " (" +
                      str(mini_batch_prompts) + "): each step's prompts are split into mini-batches of " + mini_key +
                      " prompts, one optimizer step each");
  }
  const int64_t responses = mini_batch_prompts * n;
  if (responses % workers != 0) {
    throw ConfigError(mini_key + " (" + str(mini_batch_prompts) + ") x actor_rollout_ref.rollout.n (" + str(n) +
                      ") = " + str(responses) + " responses per mini-batch must split evenly over the " + str(workers) +
                      " data-parallel ranks of the " + role + " (runtime pools / model-parallel size)");
  }
  *rows_per_worker = responses / workers;
  if (micro_batch > 0 && *rows_per_worker % micro_batch != 0) {
    throw ConfigError(micro_key + " (" + str(micro_batch) + ") must divide the " + str(*rows_per_worker) +
                      " responses each worker gets per mini-batch (" + mini_key + " x rollout.n / workers)");
  }
}

}  // namespace

bool uses_critic(const config::RunConfig& config, const Registry& components) {
  if (config.critic.enable == "true") return true;
  if (config.critic.enable == "false") return false;
  return estimator_needs(config, components).values;
}

BatchPlan make_batch_plan(const config::RunConfig& config, const Registry& components, int64_t train_size,
                          int64_t actor_workers, int64_t critic_workers) {
  const auto& actor = config.actor_rollout_ref.actor;
  const auto& rollout = config.actor_rollout_ref.rollout;
  BatchPlan plan;
  plan.needs = estimator_needs(config, components);
  if (plan.needs.values && critic_workers == 0) {
    throw ConfigError("algorithm.adv_estimator '" + config.algorithm.adv_estimator +
                      "' needs a critic's values, but critic.enable is false");
  }
  if (plan.needs.index && rollout.n < 2) {
    throw ConfigError("algorithm.adv_estimator '" + config.algorithm.adv_estimator +
                      "' compares the responses to one prompt, so actor_rollout_ref.rollout.n must be at least 2 (is " +
                      str(rollout.n) + ")");
  }
  plan.prompts_per_step = config.data.train_batch_size;
  plan.responses_per_step = plan.prompts_per_step * rollout.n;
  plan.actor_workers = actor_workers;
  plan.critic_workers = critic_workers;
  plan.response_length = config.data.max_response_length;
  plan.use_ref = actor.use_kl_loss || config.algorithm.use_kl_in_reward;
  plan.actor_epochs = actor.ppo_epochs;
  check_mini_batches("actor_rollout_ref.actor", plan.prompts_per_step, actor.ppo_mini_batch_size, rollout.n,
                     actor_workers, actor.ppo_micro_batch_size_per_gpu,
                     "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", &plan.actor_mini_batch_rows);
  if (critic_workers > 0) {
    const auto& critic = config.critic;
    const int64_t mini = critic.ppo_mini_batch_size > 0 ? critic.ppo_mini_batch_size : actor.ppo_mini_batch_size;
    check_mini_batches("critic", plan.prompts_per_step, mini, rollout.n, critic_workers,
                       critic.ppo_micro_batch_size_per_gpu, "critic.ppo_micro_batch_size_per_gpu",
                       &plan.critic_mini_batch_rows);
    plan.critic_epochs = critic.ppo_epochs > 0 ? critic.ppo_epochs : actor.ppo_epochs;
  }
  if (train_size < plan.prompts_per_step) {
    throw ConfigError("data.train_batch_size (" + str(plan.prompts_per_step) + ") is larger than the training set (" +
                      str(train_size) + " prompts in data.train_files); a step needs a full batch");
  }
  plan.steps_per_epoch = train_size / plan.prompts_per_step;
  plan.total_steps = config.trainer.total_training_steps > 0 ? config.trainer.total_training_steps
                                                             : config.trainer.total_epochs * plan.steps_per_epoch;
  return plan;
}

}  // namespace rlcore::trainer
