// The RL trainer (see rl_trainer.h and docs/trainer.md): a run's setup, validation, checkpoints
// and the choice of loop (sync_loop.cc, one_step_off_loop.cc, fully_async_loop.cc).
#include "rlcore/core/trainer/rl_trainer.h"

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <optional>
#include <ostream>

#include "rlcore/core/runtime/preemption.h"
#include "rlcore/elapsed_seconds.h"
#include "rlcore/error.h"
#include "rlcore/fault_point.h"
#include "rlcore/metric_names.h"
#include "trainer/agent_rollout.h"
#include "trainer/rl_run.h"
#include "workers/parallel.h"

namespace rlcore::trainer {

namespace {

// What the asynchronous modes cannot run beyond config::validate's rules: the
// step's own generation that only the estimator reveals (ReMax's greedy
// baselines) would meet the pool's background generation; fully_async streams
// on rollout ranks of their own, not a tensor-parallel group.
void check_async_mode(const config::RunConfig& config, const Registry& components, const trainer::BatchPlan& plan) {
  const std::string& mode = config.async_training.mode;
  if (mode == "sync") return;
  const std::string prefix = "async_training.mode: " + mode + " does not run ";
  if (plan.needs.reward_baselines) {
    throw ConfigError(prefix + "algorithm.adv_estimator " + config.algorithm.adv_estimator +
                      " (its greedy baselines are generated within the step); use async_training.mode: sync");
  }
  if (mode != "fully_async") return;
  const workers::ActorParallelism parallel = workers::actor_parallelism(config.actor_rollout_ref, components);
  if (parallel.rollout_tp > 1) {
    throw ConfigError(prefix + "a tensor-parallel rollout (" + parallel.rollout_tp_key + "); use one_step_off or sync");
  }
}

// The console line: the few numbers a researcher watches, in a fixed order.
std::vector<std::string> console_keys(const std::vector<std::string>& validation_keys) {
  std::vector<std::string> keys = {metric_names::kCriticScoreMean, metric_names::kActorPgLoss,
                                   metric_names::kActorEntropy, metric_names::kActorPpoKl, metric_names::kActorKlLoss,
                                   metric_names::kCriticVfLoss, metric_names::kResponseLengthMean,
                                   // multi-turn rollouts only (a line shows the keys it has)
                                   "num_turns/mean", "agent/tool_call_rate"};
  keys.insert(keys.end(), validation_keys.begin(), validation_keys.end());
  keys.push_back("val-aux/agent/tool_call_rate");
  keys.insert(keys.end(), {metric_names::kTimingGen, metric_names::kPerfRolloutTokensPerS, "timing_s/update_actor",
                           metric_names::kTimingStep, metric_names::kPerfThroughput});
  return keys;
}

bool due(int64_t freq, int64_t step, int64_t last) { return freq > 0 && (step % freq == 0 || step == last); }

// Calls the actor's `actor_method` and the critic's `critic_method` (when
// there is a critic) at once, each with its subdirectory of `dir`, and waits for both.
template <typename ActorReply, typename CriticReply>
void on_actor_and_critic(const workers::Method<workers::DirArgs, ActorReply>& actor_method,
                         const workers::Method<workers::DirArgs, CriticReply>& critic_method, TrainerWorkers& workers,
                         const std::string& dir) {
  std::vector<std::future<runtime::CallOutput>> calls;
  calls.push_back(workers::call(workers.actor(), actor_method, Batch(), {dir + "/actor"}));
  if (workers.critic()) calls.push_back(workers::call(*workers.critic(), critic_method, Batch(), {dir + "/critic"}));
  runtime::wait_all(calls);
}

}  // namespace

RlRun::RlRun(const Registry& registry, const config::ResolvedConfig& resolved_config,
             const std::vector<std::string>& plugin_paths, std::ostream& console)
    : components(registry),
      resolved(resolved_config),
      config(resolved.config),
      out(console),
      tokenizer(load_tokenizer(resolved.config)),
      agent_loop(trainer::make_agent_loop(resolved.config, registry, tokenizer)),
      rewards(registry, resolved.config.reward),
      checkpoints(resolved.config.run_dir()) {
  trainer::check_stop_rule(config);
  trainer::check_run_dir_writable(config.run_dir());
  fault_point("trainer.start");  // a malformed RLCORE_FAULT stops the run here
  train_set = load_dataset(config.data.train_files, "data.train_files");
  val_set = config.data.val_files.empty() ? data::Dataset() : load_dataset(config.data.val_files, "data.val_files");
  trainer::check_agent_names(train_set, "data.train_files");
  trainer::check_agent_names(val_set, "data.val_files");
  const bool critic = trainer::uses_critic(config, components);
  const auto [actor_workers, critic_workers] = trainer::TrainerWorkers::data_parallel_sizes(config, components, critic);
  plan = trainer::make_batch_plan(config, components, train_set.size(), actor_workers, critic_workers);
  check_async_mode(config, components, plan);
  sampler = std::make_unique<data::EpochSampler>(train_set.size(), plan.prompts_per_step, config.data.shuffle,
                                                 config.data.seed);
  estimator = components.create<AdvantageEstimator>(
      config.algorithm.adv_estimator,
      config::estimator_options(components, config.algorithm.adv_estimator, config.algorithm.estimator_options));
  kl_controller = make_kl_controller(config.algorithm.kl_ctrl);
  limits = trainer::generation_limits(tokenizer, plan.response_length, config.actor_rollout_ref.rollout);
  limits.agent_loop = agent_loop;
  if (config.reward.reward_model.enable) {
    reward_model = std::make_unique<trainer::RewardModel>(config.reward.reward_model, tokenizer);
  }
  validator = std::make_unique<trainer::Validator>(
      config, val_set, tokenizer, [this](const Rollout& rollout) { return score(rollout); }, limits);
  logger.add(std::make_unique<metrics::ConsoleMetricsSink>(out, console_keys(validator->core_metric_names())));
  if (!checkpoint_to_resume()) metrics::set_aside_earlier_metrics(config.trainer.logger, config.run_dir(), out);
  metrics::add_file_sinks(logger, config.trainer.logger, config.run_dir());

  out << "rlcore: " << config.algorithm.adv_estimator << " on " << train_set.size() << " prompts, "
      << plan.prompts_per_step << " x " << config.actor_rollout_ref.rollout.n << " responses per step, "
      << plan.total_steps << " steps; " << actor_workers << " actor data-parallel rank(s)"
      << (critic ? ", " + std::to_string(critic_workers) + " critic worker(s)" : std::string()) << "\n";
  const auto start = Clock::now();
  trainer::WorkerRoles roles;
  roles.critic = critic;
  roles.ref = plan.use_ref;
  roles.total_training_steps = plan.total_steps;
  roles.standalone_rollout = config.async_training.mode != "sync";
  roles.rollout = !roles.standalone_rollout;
  workers = std::make_unique<trainer::TrainerWorkers>(resolved, components, plugin_paths, roles);
  if (roles.standalone_rollout) {
    const int64_t bucket_bytes = config.actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes
                                 << 20;
    rollout_pool = std::make_unique<trainer::RolloutPool>(workers->actor(), *workers->rollout(), bucket_bytes);
  }
  out << "rlcore: workers ready in " << std::fixed << std::setprecision(1) << seconds_since(start) << " s\n"
      << std::defaultfloat;
}

Tokenizer RlRun::load_tokenizer(const config::RunConfig& config) {
  const std::string& path = config.actor_rollout_ref.model.path;
  if (path.empty()) throw ConfigError("actor_rollout_ref.model.path is required: the HF checkpoint to train");
  return Tokenizer::from_pretrained_dir(path);
}

data::Dataset RlRun::load_dataset(const std::vector<std::string>& files, const std::string& key) const {
  if (files.empty()) throw ConfigError(key + " is required: the JSONL/JSON prompts to train on");
  return data::Dataset::load(files, config.data, tokenizer, /*with_responses=*/false,
                             data::checkpoint_chat_renderer(config.actor_rollout_ref.model.path, config.data,
                                                            trainer::agent_tool_schemas(agent_loop.get())));
}

StepMetrics RlRun::validate() {
  StepMetrics sync_metrics;
  if (rollout_pool) rollout_pool->sync(step, sync_metrics);
  return validator->run(rollout_workers(), rollout_version());
}

void RlRun::sync_pool_before_first_step() {
  StepMetrics ignored;
  rollout_pool->sync(step, ignored);
}

std::string RlRun::save_checkpoint() {
  const std::string staging = checkpoints.staging_dir(step);
  on_actor_and_critic(workers::actor_methods::kSaveCheckpoint, workers::critic_methods::kSaveCheckpoint, *workers,
                      staging);
  // A batch drawn for the background generation is drawn again after a resume.
  const data::SamplerState data_order =
      streaming ? streaming->checkpoint_state() : sampler_before_pending.value_or(sampler->state());
  trainer::TrainerState state{step, data_order, kl_controller->value()};
  return checkpoints.commit(step, state, config.trainer.max_ckpt_to_keep);
}

std::optional<std::string> RlRun::checkpoint_to_resume() const {
  const std::string& mode = config.trainer.resume_mode;
  if (mode == "disable") return std::nullopt;
  if (mode == "resume_path") {
    if (config.trainer.resume_from_path.empty()) {
      throw ConfigError("trainer.resume_mode is resume_path, but trainer.resume_from_path is empty");
    }
    return config.trainer.resume_from_path;
  }
  return checkpoints.latest();
}

void RlRun::resume() {
  const std::optional<std::string> dir = checkpoint_to_resume();
  if (!dir) return;
  const trainer::TrainerState state = trainer::CheckpointStore::read_state(*dir);
  on_actor_and_critic(workers::actor_methods::kLoadCheckpoint, workers::critic_methods::kLoadCheckpoint, *workers,
                      *dir);
  step = resumed_from = state.step;
  sampler->restore(state.sampler);
  KlControlConfig kl = config.algorithm.kl_ctrl;
  kl.kl_coef = state.kl_coef;
  kl_controller = make_kl_controller(kl);
  if (!rollout_pool) {
    workers::call(workers->actor(), workers::actor_methods::kSyncWeights, Batch(), {step}).get();
  }
  out << "rlcore: resumed from " << *dir << " (step " << step << ")\n";
}

bool RlRun::finish_step(StepMetrics& metrics, FitSummary& summary, const std::function<void()>& before_validation,
                        const std::function<void()>& after_validation) {
  bool stop = false;
  metrics["training/global_step"] = static_cast<double>(step);
  metrics["training/epoch"] = static_cast<double>(sampler->state().epoch);
  if (due(config.trainer.test_freq, step, plan.total_steps)) {
    before_validation();
    const auto start = Clock::now();
    const StepMetrics validation = validate();
    after_validation();
    metrics.insert(validation.begin(), validation.end());
    metrics[metric_names::kTimingTesting] = seconds_since(start);
    if (summary.first_validation.empty()) summary.first_validation = validation;
    summary.last_validation = validation;
    stop = trainer::reached_stop_reward(config.trainer, validation);
  }
  const std::string preempted_by = runtime::PreemptionWatch::requested_name();
  const bool preempt_checkpoint = !preempted_by.empty() && config.trainer.on_preempt == "checkpoint";
  if (due(config.trainer.save_freq, step, plan.total_steps) || (stop && config.trainer.save_freq > 0) ||
      preempt_checkpoint) {
    const auto start = Clock::now();
    summary.last_checkpoint = save_checkpoint();
    metrics["timing_s/save_checkpoint"] = seconds_since(start);
  }
  logger.log(step, metrics);
  if (!preempted_by.empty()) {
    summary.preempted_by = preempted_by;
    out << "rlcore: " << preempted_by << ": stopped after step " << step
        << (preempt_checkpoint ? ", checkpointed in " + summary.last_checkpoint : std::string()) << "\n";
    return true;
  }
  if (stop) {
    out << "rlcore: validation reward reached trainer.stop_at_val_reward (" << config.trainer.stop_at_val_reward
        << ") at step " << step << "; stopping\n";
  }
  return stop;
}

struct RlTrainer::Impl {
  RlRun run;

  Impl(const Registry& components, const config::ResolvedConfig& resolved, const std::vector<std::string>& plugin_paths,
       std::ostream& out)
      : run(components, resolved, plugin_paths, out) {}

  FitSummary fit() {
    const config::RunConfig& config = run.config;
    FitSummary summary;
    summary.run_dir = config.run_dir();
    if (std::find(config.trainer.logger.begin(), config.trainer.logger.end(), "jsonl") != config.trainer.logger.end()) {
      summary.metrics_file = (std::filesystem::path(summary.run_dir) / "metrics.jsonl").string();
    }
    run.resume();
    summary.resumed_from = run.resumed_from;
    if ((config.trainer.val_before_train && run.step == 0) || config.trainer.val_only) {
      summary.first_validation = run.validate();
      if (!summary.first_validation.empty()) run.logger.log(run.step, summary.first_validation);
    }
    if (config.trainer.val_only) {
      run.logger.flush();
      summary.steps = run.step;
      return summary;
    }
    if (config.async_training.mode == "fully_async") {
      run_fully_async_loop(run, summary);
    } else if (run.rollout_pool) {
      run_one_step_off_loop(run, summary);
    } else {
      run_sync_loop(run, summary);
    }
    run.logger.flush();
    summary.steps = run.step;
    return summary;
  }
};

RlTrainer::RlTrainer(const Registry& components, const config::ResolvedConfig& resolved,
                     const std::vector<std::string>& plugin_paths, std::ostream& out)
    : impl_(std::make_unique<Impl>(components, resolved, plugin_paths, out)) {}

RlTrainer::~RlTrainer() = default;

FitSummary RlTrainer::fit() { return impl_->fit(); }

}  // namespace rlcore::trainer
