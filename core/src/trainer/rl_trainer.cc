// The RL trainer's controller loop (see rl_trainer.h and docs/trainer.md).
#include "rlcore/core/trainer/rl_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <iomanip>
#include <limits>
#include <optional>
#include <ostream>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include "rlcore/advantage_estimator.h"
#include "rlcore/core/data/sampler.h"
#include "rlcore/core/metrics/metrics.h"
#include "rlcore/core/trainer/reward_router.h"
#include "rlcore/device.h"
#include "rlcore/elapsed_seconds.h"
#include "rlcore/error.h"
#include "rlcore/fault_point.h"
#include "rlcore/kl_controller.h"
#include "rlcore/metric_names.h"
#include "rlcore/rl_functional.h"
#include "rlcore/rollout_correction.h"
#include "trainer/agent_rollout.h"
#include "trainer/checkpoint.h"
#include "trainer/dynamic_sampling.h"
#include "trainer/generation_dump.h"
#include "trainer/generation.h"
#include "workers/losses.h"
#include "workers/parallel.h"
#include "trainer/batch_plan.h"
#include "trainer/reward_model.h"
#include "trainer/rewards.h"
#include "trainer/seqlen_balancing.h"
#include "trainer/rollout_pool.h"
#include "workers/sequences.h"
#include "trainer/step_metrics.h"
#include "trainer/streaming_rollout.h"
#include "trainer/validation.h"
#include "trainer/trainer_workers.h"

namespace rlcore::trainer {

using trainer::Rollout;
using trainer::StepMetrics;

namespace {

using Clock = std::chrono::steady_clock;

// What the asynchronous modes cannot run beyond config::validate's rules: the
// step's own generation that only the estimator reveals (ReMax's greedy
// baselines) would meet the pool's background generation; fully_async streams
// on rollout ranks of their own, not a tensor-parallel group.
void check_async_mode(const config::RunConfig& config, const trainer::BatchPlan& plan) {
  const std::string& mode = config.async_training.mode;
  if (mode == "sync") return;
  const std::string prefix = "async_training.mode: " + mode + " does not run ";
  if (plan.needs.reward_baselines) {
    throw ConfigError(prefix + "algorithm.adv_estimator " + config.algorithm.adv_estimator +
                      " (its greedy baselines are generated within the step); use async_training.mode: sync");
  }
  if (mode != "fully_async") return;
  if (workers::actor_parallelism(config.actor_rollout_ref).rollout_tp > 1) {
    throw ConfigError(prefix +
                      "a tensor-parallel rollout (actor_rollout_ref.rollout.tensor_model_parallel_size); "
                      "use one_step_off or sync");
  }
}

const std::vector<std::string> kEngineColumns = {columns::kInputIds, columns::kAttentionMask, columns::kPositionIds,
                                                 columns::kResponses, columns::kResponseMask};

std::vector<std::string> with_engine_columns(std::vector<std::string> extra) {
  extra.insert(extra.end(), kEngineColumns.begin(), kEngineColumns.end());
  return extra;
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

}  // namespace

struct RlTrainer::Impl {
  // A batch generated and scored in the background (async_training.mode:
  // one_step_off) while the actor trains on the one before.
  struct BackgroundRollout {
    trainer::ScoredRollout scored;
    StepMetrics metrics;         // timing_s/gen, timing_s/reward, rollout/*
    int64_t weight_version = 0;  // the rollout pool's weights when it was generated
    Clock::time_point finished;
  };

  const Registry& components;
  config::ResolvedConfig resolved;
  const config::RunConfig& config;
  std::ostream& out;
  Tokenizer tokenizer;
  std::shared_ptr<const agent::AgentLoop> agent_loop;  // null unless multi_turn.enable
  data::Dataset train_set;
  data::Dataset val_set;
  trainer::BatchPlan plan;
  std::unique_ptr<data::EpochSampler> sampler;
  std::shared_ptr<AdvantageEstimator> estimator;
  std::unique_ptr<KlController> kl_controller;
  RewardRouter rewards;
  trainer::CheckpointStore checkpoints;
  std::unique_ptr<trainer::RewardModel> reward_model;  // null without reward.reward_model.enable
  std::unique_ptr<trainer::TrainerWorkers> workers;
  metrics::MetricsLogger logger;
  trainer::GenerationLimits limits;
  std::unique_ptr<trainer::Validator> validator;
  std::unique_ptr<trainer::RolloutPool> rollout_pool;        // async_training.mode one_step_off
  std::optional<data::SamplerState> sampler_before_pending;  // the sampler before the background batch was drawn
  trainer::StreamingRollout* streaming = nullptr;            // while fully_async runs
  int64_t step = 0;
  int64_t resumed_from = 0;

  Impl(const Registry& registry, const config::ResolvedConfig& resolved_config,
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
    const auto [actor_workers, critic_workers] = trainer::TrainerWorkers::data_parallel_sizes(config, critic);
    plan = trainer::make_batch_plan(config, components, train_set.size(), actor_workers, critic_workers);
    check_async_mode(config, plan);
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
    workers = std::make_unique<trainer::TrainerWorkers>(resolved, plugin_paths, roles);
    if (roles.standalone_rollout) {
      const int64_t bucket_bytes = config.actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes
                                   << 20;
      rollout_pool = std::make_unique<trainer::RolloutPool>(workers->actor(), *workers->rollout(), bucket_bytes);
    }
    out << "rlcore: workers ready in " << std::fixed << std::setprecision(1) << seconds_since(start) << " s\n"
        << std::defaultfloat;
  }

  static Tokenizer load_tokenizer(const config::RunConfig& config) {
    const std::string& path = config.actor_rollout_ref.model.path;
    if (path.empty()) throw ConfigError("actor_rollout_ref.model.path is required: the HF checkpoint to train");
    return Tokenizer::from_pretrained_dir(path);
  }

  data::Dataset load_dataset(const std::vector<std::string>& files, const std::string& key) const {
    if (files.empty()) throw ConfigError(key + " is required: the JSONL/JSON prompts to train on");
    return data::Dataset::load(files, config.data, tokenizer, /*with_responses=*/false,
                               data::checkpoint_chat_renderer(config.actor_rollout_ref.model.path, config.data,
                                                              trainer::agent_tool_schemas(agent_loop.get())));
  }

  trainer::RolloutWorkers rollout_workers() const {
    return rollout_pool ? rollout_pool->workers() : trainer::colocated_rollout(workers->actor());
  }
  // The weight version the rollout generates with: the colocated rollout's is the step.
  int64_t rollout_version() const { return rollout_pool ? rollout_pool->version() : step; }

  Rollout generate(const std::vector<const data::Example*>& prompts, int64_t n, const workers::Sampling& sampling) {
    return trainer::generate_rollout(rollout_workers(), prompts, n, sampling, limits, rollout_version());
  }

  // `gen_batch` numbers the generation batches of one step (dynamic sampling
  // draws more than one), so each gets its own random stream.
  workers::Sampling train_sampling(int64_t for_step, int64_t gen_batch = 0) const {
    constexpr int64_t kGenBatchStride = 104729;  // a prime far from the step increments
    const auto& rollout = config.actor_rollout_ref.rollout;
    workers::Sampling sampling;
    sampling.temperature = rollout.temperature;
    sampling.top_k = rollout.top_k;
    sampling.top_p = rollout.top_p;
    sampling.seed = config.data.seed * 1000003 + for_step + gen_batch * kGenBatchStride;
    return sampling;
  }

  // A standalone rollout pool gets the step's weights first (it must not be generating).
  StepMetrics validate() {
    StepMetrics sync_metrics;
    if (rollout_pool) rollout_pool->sync(step, sync_metrics);
    return validator->run(rollout_workers(), rollout_version());
  }

  // The rule graders' and (reward.reward_model) the reward model's rewards of a rollout.
  trainer::Rewards score(const Rollout& rollout) {
    std::optional<trainer::ModelScores> model;
    if (reward_model) model = reward_model->score(*workers->reward_model(), rollout.batch, rollout.examples);
    return trainer::compute_rewards(rollout.batch, rollout.examples, tokenizer, rewards,
                                    trainer::overlong_shaping(config), model ? &*model : nullptr,
                                    rollout.extra_info.empty() ? nullptr : &rollout.extra_info);
  }

  // ---- one step --------------------------------------------------------------

  // Generation and rewards of one batch of prompts (their times add up over
  // the batches of a step with dynamic sampling).
  // `for_step`: the step the batch is for (its sampling seed).
  trainer::ScoredRollout generate_and_score(const std::vector<int64_t>& indices, int64_t gen_batch, int64_t for_step,
                                            StepMetrics& metrics) {
    std::vector<const data::Example*> prompts;
    for (int64_t index : indices) prompts.push_back(&train_set.at(index));
    trainer::ScoredRollout scored;
    auto start = Clock::now();
    scored.rollout = generate(prompts, config.actor_rollout_ref.rollout.n, train_sampling(for_step, gen_batch));
    metrics[metric_names::kTimingGen] += seconds_since(start);
    trainer::add_rollout_metrics(metrics, scored.rollout.engine_stats,
                                 scored.rollout.batch.tensor(columns::kResponseMask).sum().item<double>());
    for (const auto& [name, value] : scored.rollout.agent_metrics) metrics[name] = value;
    start = Clock::now();
    scored.rewards = score(scored.rollout);
    metrics["timing_s/reward"] += seconds_since(start);
    return scored;
  }

  // DAPO: drops the groups whose responses all have the same filter metric and
  // generates from further prompts until a step's worth of groups remains.
  trainer::ScoredRollout keep_informative_groups(trainer::ScoredRollout first, StepMetrics& metrics) {
    const config::FilterGroupsConfig& filter = config.algorithm.filter_groups;
    std::vector<trainer::ScoredRollout> parts;
    int64_t groups = 0;
    int64_t batches = 0;
    auto add = [&](const trainer::ScoredRollout& scored) {
      ++batches;
      const std::vector<int64_t> rows = trainer::rows_of_informative_groups(
          scored.rollout.batch.tensor(columns::kUid), trainer::filter_metric(scored.rewards, filter.metric));
      if (rows.empty()) return;
      parts.push_back(trainer::select_rows(scored, rows));
      groups += trainer::count_groups(parts.back().rollout.batch.tensor(columns::kUid));
    };
    add(first);
    while (groups < plan.prompts_per_step) {
      if (filter.max_num_gen_batches > 0 && batches >= filter.max_num_gen_batches) {
        throw ValueError(
            "step " + std::to_string(step + 1) + ": after " + std::to_string(batches) + " generation batches only " +
            std::to_string(groups) + " of " + std::to_string(plan.prompts_per_step) +
            " prompts have responses that differ in '" + filter.metric +
            "' (algorithm.filter_groups.max_num_gen_batches = " + std::to_string(filter.max_num_gen_batches) +
            "); the data may be too hard or too easy for the model, or set it to 0 for no limit");
      }
      // With no bound (max_num_gen_batches <= 0) a data set without one informative group would
      // loop forever: a whole epoch of prompts without any is an error too.
      if (groups == 0 && batches * plan.prompts_per_step >= train_set.size()) {
        throw ValueError("step " + std::to_string(step + 1) + ": a whole epoch of prompts (" + std::to_string(batches) +
                         " generation batches) gave no group whose responses differ in '" + filter.metric +
                         "' (algorithm.filter_groups); every response scores the same");
      }
      add(generate_and_score(sampler->next(), batches, step, metrics));
    }
    metrics["train/num_gen_batches"] = static_cast<double>(batches);
    return trainer::concat_groups(parts, plan.prompts_per_step, limits.pad_token_id);
  }

  StepMetrics train_step(const std::vector<int64_t>& indices) {
    StepMetrics metrics;
    const auto step_start = Clock::now();
    trainer::ScoredRollout scored = generate_and_score(indices, /*gen_batch=*/0, step, metrics);
    if (config.algorithm.filter_groups.enable) scored = keep_informative_groups(std::move(scored), metrics);
    return train_on(std::move(scored), std::move(metrics), step_start);
  }

  // Everything of a step after its batch is generated and scored: log-probs,
  // advantages, the updates, and (colocated) the hybrid engine's version.
  StepMetrics train_on(trainer::ScoredRollout scored, StepMetrics metrics, Clock::time_point step_start) {
    auto timed = [&metrics](const std::string& name, auto&& work) {
      const auto start = Clock::now();
      work();
      metrics["timing_s/" + name] = seconds_since(start);
    };
    Rollout& rollout = scored.rollout;
    Batch& batch = rollout.batch;
    batch.set(columns::kTokenLevelScores, scored.rewards.token_level_scores);
    if (!config.trainer.rollout_data_dir.empty()) {
      trainer::GenerationDump dump(config.trainer.rollout_data_dir, step + 1, "trainer.rollout_data_dir");
      dump.add(rollout, scored.rewards, tokenizer);
      dump.close();
    }
    for (const auto& [name, column] : scored.rewards.extras) {
      batch.set(columns::kRewardComponentPrefix + name, at::tensor(column, at::kDouble).to(at::kFloat));  // for gdpo
      double sum = 0;
      int64_t count = 0;
      for (double value : column) {
        if (!std::isnan(value)) sum += value, ++count;
      }
      if (count > 0) metrics["critic/score_extra/" + name] = sum / static_cast<double>(count);
    }
    if (plan.needs.reward_baselines) {
      timed("gen_max", [&] { add_greedy_baselines(batch, rollout.examples); });
    }

    if (config.trainer.balance_batch && plan.actor_workers > 1 && batch.size() % plan.actor_workers == 0) {
      const trainer::BalancedOrder balanced =
          trainer::balance_batch_order(batch.tensor(columns::kAttentionMask), plan.actor_workers);
      batch.reorder(at::tensor(balanced.order, at::kLong));
      metrics.insert(balanced.metrics.begin(), balanced.metrics.end());
    }
    const Batch engine_input = batch.select(kEngineColumns);
    const double temperature = config.actor_rollout_ref.rollout.temperature;
    const std::string& replay_mode = config.actor_rollout_ref.actor.router_replay.mode;
    // The rollout's routing (rollout.enable_rollout_routing_replay), apart from the trainer's.
    const std::optional<at::Tensor> rollout_routing =
        batch.contains(columns::kRoutedExperts)
            ? std::optional<at::Tensor>(batch.pop({columns::kRoutedExperts}).tensor(columns::kRoutedExperts))
            : std::nullopt;
    if (replay_mode == "R3" && !rollout_routing) {
      throw ValueError(
          "actor_rollout_ref.actor.router_replay.mode = R3: the rollout returned no routed_experts column (is "
          "actor_rollout_ref.rollout.enable_rollout_routing_replay on, and does the rollout engine record it?)");
    }
    timed("old_log_prob", [&] {
      std::vector<std::future<runtime::CallOutput>> calls;
      workers::LogProbArgs old_log_prob{temperature, true};
      Batch actor_input = engine_input;
      if (replay_mode == "R3") {
        actor_input.set(columns::kRoutedExperts, *rollout_routing);
        old_log_prob.replay_routing = true;
      }
      // R2 replays what this pass routes; with the rollout's too, the two are compared.
      old_log_prob.record_routing = replay_mode == "R2" || rollout_routing.has_value();
      calls.push_back(
          workers::call(workers->actor(), workers::actor_methods::kComputeLogProb, actor_input, old_log_prob));
      if (plan.use_ref) {
        calls.push_back(workers::call(workers->actor(), workers::actor_methods::kComputeRefLogProb, engine_input,
                                      workers::LogProbArgs{temperature, false}));
      }
      if (workers->critic()) {
        calls.push_back(workers::call(*workers->critic(), workers::critic_methods::kComputeValues, engine_input));
      }
      for (auto& output : runtime::wait_all(calls)) batch.union_with(output.batch);
    });
    if (batch.contains(columns::kRoutedExperts)) {
      const at::Tensor trainer_routing = batch.pop({columns::kRoutedExperts}).tensor(columns::kRoutedExperts);
      if (rollout_routing) add_routing_mismatch(*rollout_routing, trainer_routing, metrics);
      if (replay_mode == "R2") batch.set(columns::kRoutedExperts, trainer_routing);
    }
    if (replay_mode == "R3") batch.set(columns::kRoutedExperts, *rollout_routing);
    metrics[metric_names::kActorEntropy] =
        masked_mean(batch.tensor(columns::kEntropys), batch.tensor(columns::kResponseMask)).item<double>();
    add_rollout_probs_diff(batch, metrics);

    timed("adv", [&] { compute_advantages(batch, metrics); });

    timed("update", [&] {
      std::optional<std::future<runtime::CallOutput>> critic_update;
      if (workers->critic()) {
        critic_update = workers::call(*workers->critic(), workers::critic_methods::kUpdateCritic,
                                      batch.select(with_engine_columns({columns::kValues, columns::kReturns})),
                                      workers::UpdateCriticArgs{plan.critic_mini_batch_rows, plan.critic_epochs});
      }
      std::vector<std::string> actor_columns = {columns::kOldLogProbs, columns::kAdvantages};
      if (config.actor_rollout_ref.actor.use_kl_loss) actor_columns.push_back(columns::kRefLogProb);
      if (batch.contains(columns::kRolloutIsWeights)) actor_columns.push_back(columns::kRolloutIsWeights);
      const bool replay = config.actor_rollout_ref.actor.router_replay.replays();
      if (replay) actor_columns.push_back(columns::kRoutedExperts);
      const auto start = Clock::now();
      std::vector<std::future<runtime::CallOutput>> updates;
      updates.push_back(workers::call(
          workers->actor(), workers::actor_methods::kUpdateActor, batch.select(with_engine_columns(actor_columns)),
          workers::UpdateActorArgs{plan.actor_mini_batch_rows, plan.actor_epochs, temperature, replay}));
      if (critic_update) updates.push_back(std::move(*critic_update));
      const std::vector<runtime::CallOutput> outputs = runtime::wait_all(updates);
      workers::reply_of(workers::actor_methods::kUpdateActor, outputs[0].replies.front())
          .add_to(metrics, workers::kActorRole);
      if (outputs.size() > 1) {
        workers::reply_of(workers::critic_methods::kUpdateCritic, outputs[1].replies.front())
            .add_to(metrics, workers::kCriticRole);
      }
      metrics["timing_s/update_actor"] = seconds_since(start);
    });
    ++step;
    if (!rollout_pool)
      timed("sync_weights", [&] {
        // The reply carries the stats of this step's swaps (train <-> rollout around each generate);
        // ranks swap in lockstep, so the slowest rank's times and the largest peak are reported.
        const runtime::CallOutput synced =
            workers::call(workers->actor(), workers::actor_methods::kSyncWeights, Batch(), {step}).get();
        double to_rollout = 0, to_train = 0, bytes_moved = 0;
        std::map<std::string, double> memory;  // the largest of each over the workers
        double rss_min = std::numeric_limits<double>::infinity(), rss_max = 0, rss_sum = 0;
        for (const auto& reply : synced.replies) {
          const workers::SyncWeightsReply sync = workers::reply_of(workers::actor_methods::kSyncWeights, reply);
          const auto rss = static_cast<double>(sync.rss_bytes);
          rss_min = std::min(rss_min, rss);
          rss_max = std::max(rss_max, rss);
          rss_sum += rss;
          metrics["memory/worker_rss_bytes/rank_" + std::to_string(reply.rank)] = rss;  // a leak in one rank
          to_rollout = std::max(to_rollout, sync.swaps.to_rollout_s);
          to_train = std::max(to_train, sync.swaps.to_train_s);
          bytes_moved = std::max(bytes_moved, static_cast<double>(sync.swaps.bytes_moved));
          const std::pair<const char*, int64_t> peaks[] = {{"planned_peak_bytes", sync.swaps.planned_peak_bytes},
                                                           {"measured_peak_bytes", sync.swaps.measured_peak_bytes},
                                                           {"allocated_bytes", sync.allocated_bytes},
                                                           {"reserved_bytes", sync.reserved_bytes}};
          for (const auto& [key, bytes] : peaks) memory[key] = std::max(memory[key], static_cast<double>(bytes));
          for (const auto& [phase, seconds] : sync.swaps.phases) {
            double& slot = metrics["timing_s/reshard_" + phase];
            slot = std::max(slot, seconds);
          }
        }
        metrics["timing_s/reshard_to_rollout"] = to_rollout;
        metrics["timing_s/reshard_to_train"] = to_train;
        metrics["perf/swap_GBps"] = to_rollout > 0 ? bytes_moved / to_rollout / 1e9 : 0.0;
        metrics["perf/swap_bytes"] = bytes_moved;
        metrics["memory/peak_swap_bytes"] = memory["measured_peak_bytes"];
        metrics["memory/planned_peak_swap_bytes"] = memory["planned_peak_bytes"];
        metrics["memory/allocated_bytes"] = memory["allocated_bytes"];
        metrics["memory/reserved_bytes"] = memory["reserved_bytes"];
        metrics["memory/worker_rss_bytes/max"] = rss_max;
        metrics["memory/worker_rss_bytes/min"] = rss_min;
        metrics["memory/worker_rss_bytes/mean"] = rss_sum / static_cast<double>(synced.replies.size());
      });
    metrics["memory/controller_rss_bytes"] = static_cast<double>(process_rss_bytes());
    metrics["perf/cpu_memory_used_gb"] = static_cast<double>(host_memory_used_bytes()) / (1 << 30);
    const auto data = trainer::data_metrics(batch);
    metrics.insert(data.begin(), data.end());
    const auto variance = trainer::variance_proxy_metrics(
        batch, metrics.count(metric_names::kActorGradNorm) ? &metrics.at(metric_names::kActorGradNorm) : nullptr);
    metrics.insert(variance.begin(), variance.end());
    metrics[metric_names::kTimingStep] = seconds_since(step_start);
    const auto perf = trainer::throughput_metrics(batch, metrics[metric_names::kTimingStep], plan.actor_workers);
    metrics.insert(perf.begin(), perf.end());
    return metrics;
  }

  // verl's training/rollout_probs_diff_*: how far the rollout engine's token
  // probabilities are from the trainer's for the same tokens (a mismatch
  // makes the update off-policy without anyone noticing).
  static void add_rollout_probs_diff(const Batch& batch, StepMetrics& metrics) {
    const at::Tensor mask = batch.tensor(columns::kResponseMask).to(at::kBool);
    const at::Tensor diff = (batch.tensor(columns::kRolloutLogProbs).exp() - batch.tensor(columns::kOldLogProbs).exp())
                                .abs()
                                .masked_select(mask);
    if (diff.numel() == 0) return;
    metrics["training/rollout_probs_diff_max"] = diff.max().item<double>();
    metrics["training/rollout_probs_diff_mean"] = diff.mean().item<double>();
  }

  // How often the trainer's old-log-prob pass routed a token to other experts
  // than the rollout did (rlcore's metric, docs/moe.md): the share of the
  // (token, sparse layer) pairs the rollout recorded whose expert sets differ.
  // 0 under R3, whose pass replays the rollout's routing.
  static void add_routing_mismatch(const at::Tensor& rollout, const at::Tensor& trainer, StepMetrics& metrics) {
    const at::Tensor recorded = rollout.select(-1, 0).ge(0);  // [B, L, layers]
    const at::Tensor differs =
        std::get<0>(rollout.sort(-1)).ne(std::get<0>(trainer.to(rollout.scalar_type()).sort(-1))).any(-1);
    const int64_t pairs = recorded.sum().item<int64_t>();
    if (pairs == 0) return;
    metrics["training/rollout_routing_mismatch"] =
        static_cast<double>(differs.logical_and(recorded).sum().item<int64_t>()) / static_cast<double>(pairs);
  }

  // ReMax: the reward of each prompt's greedy response is its rows' baseline.
  // `examples` are the rows' prompts, each repeated rollout.n times.
  void add_greedy_baselines(Batch& batch, const std::vector<const data::Example*>& examples) {
    workers::Sampling greedy = train_sampling(step);
    greedy.greedy = true;
    const int64_t n = config.actor_rollout_ref.rollout.n;
    std::vector<const data::Example*> prompts;
    for (size_t row = 0; row < examples.size(); row += static_cast<size_t>(n)) prompts.push_back(examples[row]);
    const Rollout baseline = generate(prompts, 1, greedy);
    const trainer::Rewards scored = score(baseline);
    at::Tensor baselines = at::empty({batch.size()}, at::kFloat);
    for (int64_t row = 0; row < batch.size(); ++row) baselines[row] = scored.scores[row / n];
    batch.set(columns::kRewardBaselines, baselines);
  }

  // verl's decoupled rollout correction, between the rewards and the
  // advantages: rejection sampling narrows response_mask, importance weights
  // go to the policy loss, and the rollout_corr/ metrics (the off-policy gap)
  // are reported every step.
  void apply_rollout_correction(Batch& batch, StepMetrics& metrics) const {
    const RolloutCorrectionResult corrected = compute_rollout_correction(
        batch.tensor(columns::kOldLogProbs), batch.tensor(columns::kRolloutLogProbs),
        batch.tensor(columns::kResponseMask), config.algorithm.rollout_correction.settings());
    batch.set(columns::kResponseMask, corrected.response_mask);
    if (corrected.rollout_is_weights.defined()) batch.set(columns::kRolloutIsWeights, corrected.rollout_is_weights);
    metrics.insert(corrected.metrics.begin(), corrected.metrics.end());
  }

  void compute_advantages(Batch& batch, StepMetrics& metrics) {
    const at::Tensor mask = batch.tensor(columns::kResponseMask);
    if (config.algorithm.use_kl_in_reward) {
      const KlInRewardResult kl =
          apply_kl_penalty(batch.tensor(columns::kTokenLevelScores), batch.tensor(columns::kOldLogProbs),
                           batch.tensor(columns::kRefLogProb), mask, *kl_controller, config.algorithm.kl_penalty);
      batch.set(columns::kTokenLevelRewards, kl.token_level_rewards);
      metrics["actor/reward_kl_penalty"] = kl.current_kl;
      metrics["actor/reward_kl_penalty_coeff"] = kl.beta;
    } else {
      batch.set(columns::kTokenLevelRewards, batch.tensor(columns::kTokenLevelScores));
    }
    apply_rollout_correction(batch, metrics);
    const AdvantageOutput advantages = estimator->compute(advantage_input_from_batch(batch, columns::kUid));
    batch.set(columns::kAdvantages, advantages.advantages.to(at::kFloat));
    batch.set(columns::kReturns, advantages.returns.to(at::kFloat));
  }

  // ---- checkpoints -------------------------------------------------------------

  // Calls the actor's `actor_method` and the critic's `critic_method` (when
  // there is a critic) at once, each with its subdirectory of `dir`, and waits for both.
  template <typename ActorReply, typename CriticReply>
  void on_actor_and_critic(const workers::Method<workers::DirArgs, ActorReply>& actor_method,
                           const workers::Method<workers::DirArgs, CriticReply>& critic_method,
                           const std::string& dir) {
    std::vector<std::future<runtime::CallOutput>> calls;
    calls.push_back(workers::call(workers->actor(), actor_method, Batch(), {dir + "/actor"}));
    if (workers->critic())
      calls.push_back(workers::call(*workers->critic(), critic_method, Batch(), {dir + "/critic"}));
    runtime::wait_all(calls);
  }

  std::string save_checkpoint() {
    const std::string staging = checkpoints.staging_dir(step);
    on_actor_and_critic(workers::actor_methods::kSaveCheckpoint, workers::critic_methods::kSaveCheckpoint, staging);
    // A batch drawn for the background generation is drawn again after a resume.
    const data::SamplerState data_order =
        streaming ? streaming->checkpoint_state() : sampler_before_pending.value_or(sampler->state());
    trainer::TrainerState state{step, data_order, kl_controller->value()};
    return checkpoints.commit(step, state, config.trainer.max_ckpt_to_keep);
  }

  std::optional<std::string> checkpoint_to_resume() const {
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

  void resume() {
    const std::optional<std::string> dir = checkpoint_to_resume();
    if (!dir) return;
    const trainer::TrainerState state = trainer::CheckpointStore::read_state(*dir);
    on_actor_and_critic(workers::actor_methods::kLoadCheckpoint, workers::critic_methods::kLoadCheckpoint, *dir);
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

  // ---- the loop ---------------------------------------------------------------------

  // After a step's update: validation and a checkpoint when due, then the
  // metrics logged. `before_validation` and `after_validation` run around a
  // due validation (the rollout pool must be done with its background work).
  // Returns true to stop (trainer.stop_at_val_reward reached).
  template <class BeforeValidation, class AfterValidation>
  bool finish_step(StepMetrics& metrics, FitSummary& summary, BeforeValidation&& before_validation,
                   AfterValidation&& after_validation) {
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
    if (due(config.trainer.save_freq, step, plan.total_steps) || (stop && config.trainer.save_freq > 0)) {
      const auto start = Clock::now();
      summary.last_checkpoint = save_checkpoint();
      metrics["timing_s/save_checkpoint"] = seconds_since(start);
    }
    logger.log(step, metrics);
    if (stop) {
      out << "rlcore: validation reward reached trainer.stop_at_val_reward (" << config.trainer.stop_at_val_reward
          << ") at step " << step << "; stopping\n";
    }
    return stop;
  }

  // Draws the batch for step `for_step` and generates and scores it on the
  // rollout pool in the background, with the weights the pool has now.
  std::future<BackgroundRollout> launch_rollout(int64_t for_step) {
    sampler_before_pending = sampler->state();
    const std::vector<int64_t> indices = sampler->next();
    const int64_t version = rollout_pool->version();
    return std::async(std::launch::async, [this, indices, for_step, version] {
      BackgroundRollout done;
      done.scored = generate_and_score(indices, /*gen_batch=*/0, for_step, done.metrics);
      done.weight_version = version;
      done.finished = Clock::now();
      return done;
    });
  }

  // async_training.mode one_step_off (docs/async.md): step s trains on the
  // batch generated while step s - 1 trained, by the weights before that
  // update (staleness 1; 0 for the first step). Each step: wait for that
  // batch, sync the pool to the actor's weights, start the next batch, train.
  void run_one_step_off(FitSummary& summary) {
    StepMetrics ignored;
    rollout_pool->sync(step, ignored);  // a resumed run's weights
    std::optional<std::future<BackgroundRollout>> pending = launch_rollout(step);
    bool stop = false;
    while (step < plan.total_steps && !stop) {
      const auto step_start = Clock::now();
      StepMetrics metrics;
      BackgroundRollout ready = pending->get();
      pending.reset();
      sampler_before_pending.reset();
      metrics[metric_names::kTimingWaitPrevGen] = seconds_since(step_start);
      metrics.insert(ready.metrics.begin(), ready.metrics.end());
      const auto staleness = static_cast<double>(step - ready.weight_version);
      metrics[metric_names::kAsyncStalenessMean] = staleness;
      metrics[metric_names::kAsyncStalenessMax] = staleness;
      metrics["async/weight_version"] = static_cast<double>(ready.weight_version);
      rollout_pool->sync(step, metrics);
      if (step + 1 < plan.total_steps) pending = launch_rollout(step + 1);
      const auto rollout_idle_until = Clock::now();
      metrics = train_on(std::move(ready.scored), std::move(metrics), step_start);
      const double step_seconds = metrics[metric_names::kTimingStep];
      const double rollout_idle = std::chrono::duration<double>((pending ? rollout_idle_until : Clock::now()) -
                                                                std::max(ready.finished, step_start))
                                      .count();
      metrics[metric_names::kTrainerIdleRatio] =
          step_seconds > 0 ? metrics[metric_names::kTimingWaitPrevGen] / step_seconds : 0.0;
      metrics[metric_names::kRollouterIdleRatio] = step_seconds > 0 ? std::max(0.0, rollout_idle) / step_seconds : 0.0;
      stop = finish_step(
          metrics, summary,
          [&] {
            if (pending) pending->wait();
          },
          [] {});
    }
    if (pending) pending->wait();  // no generation left running when the workers shut down
  }

  // async_training.mode fully_async (docs/async.md): the pool streams groups
  // continuously (trainer/streaming_rollout.h); each step trains on the first
  // data.train_batch_size groups to finish; every trigger_parameter_sync_step
  // steps the actor's weights go to the pool.
  void run_fully_async(FitSummary& summary) {
    const config::AsyncTrainingConfig& async = config.async_training;
    StepMetrics ignored;
    rollout_pool->sync(step, ignored);  // a resumed run's weights
    trainer::StreamRequests requests;
    requests.prompts_per_step = plan.prompts_per_step;
    requests.n = config.actor_rollout_ref.rollout.n;
    requests.sampling = train_sampling(step);  // its seed unused: a seed per request
    requests.seed = config.data.seed * 1000003 + step;
    requests.limits = limits;
    trainer::StreamingRollout stream(*rollout_pool, train_set, *sampler, async, std::move(requests));
    streaming = &stream;
    struct Detach {  // checkpoints read the stream's data order only while it runs
      trainer::StreamingRollout*& pointer;
      ~Detach() { pointer = nullptr; }
    } detach{streaming};
    bool stop = false;
    while (step < plan.total_steps && !stop) {
      const auto step_start = Clock::now();
      StepMetrics metrics;
      const std::vector<trainer::StreamedGroup> groups = stream.take(step, metrics);
      const double rollout_idle = metrics[metric_names::kRollouterIdleS];
      metrics.erase(metric_names::kRollouterIdleS);
      trainer::ScoredRollout scored;
      scored.rollout = trainer::streamed_rollout(groups, step, limits, metrics);
      const auto reward_start = Clock::now();
      scored.rewards = score(scored.rollout);
      metrics["timing_s/reward"] = seconds_since(reward_start);
      metrics = train_on(std::move(scored), std::move(metrics), step_start);
      if (step % async.trigger_parameter_sync_step == 0 || step == plan.total_steps) stream.sync(step, metrics);
      const double step_seconds = metrics[metric_names::kTimingStep];
      metrics[metric_names::kTrainerIdleRatio] =
          step_seconds > 0 ? metrics[metric_names::kTimingWaitPrevGen] / step_seconds : 0.0;
      metrics[metric_names::kRollouterIdleRatio] = step_seconds > 0 ? std::min(1.0, rollout_idle / step_seconds) : 0.0;
      stop = finish_step(
          metrics, summary, [&] { stream.quiesce(); }, [&] { stream.resume(); });
    }
  }

  static bool due(int64_t freq, int64_t step, int64_t last) { return freq > 0 && (step % freq == 0 || step == last); }

  FitSummary fit() {
    FitSummary summary;
    summary.run_dir = config.run_dir();
    if (std::find(config.trainer.logger.begin(), config.trainer.logger.end(), "jsonl") != config.trainer.logger.end()) {
      summary.metrics_file = (std::filesystem::path(summary.run_dir) / "metrics.jsonl").string();
    }
    resume();
    summary.resumed_from = resumed_from;
    if ((config.trainer.val_before_train && step == 0) || config.trainer.val_only) {
      summary.first_validation = validate();
      if (!summary.first_validation.empty()) logger.log(step, summary.first_validation);
    }
    if (config.trainer.val_only) {
      logger.flush();
      summary.steps = step;
      return summary;
    }
    if (config.async_training.mode == "fully_async") {
      run_fully_async(summary);
    } else if (rollout_pool) {
      run_one_step_off(summary);
    } else {
      bool stop = false;
      while (step < plan.total_steps && !stop) {
        StepMetrics metrics = train_step(sampler->next());
        stop = finish_step(
            metrics, summary, [] {}, [] {});
      }
    }
    logger.flush();
    summary.steps = step;
    return summary;
  }
};

RlTrainer::RlTrainer(const Registry& components, const config::ResolvedConfig& resolved,
                     const std::vector<std::string>& plugin_paths, std::ostream& out)
    : impl_(std::make_unique<Impl>(components, resolved, plugin_paths, out)) {}

RlTrainer::~RlTrainer() = default;

FitSummary RlTrainer::fit() { return impl_->fit(); }

}  // namespace rlcore::trainer
