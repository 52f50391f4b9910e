// The step every async_training.mode shares (see trainer/rl_run.h): a batch
// generated and scored, then log-probs, advantages, the updates and the step's metrics.
#include <future>
#include <optional>

#include <ATen/ATen.h>

#include "rlcore/elapsed_seconds.h"
#include "rlcore/fault_point.h"
#include "rlcore/metric_names.h"
#include "rlcore/rl_functional.h"
#include "rlcore/rollout_correction.h"
#include "trainer/generation_dump.h"
#include "trainer/rollout_probs.h"
#include "trainer/rl_run.h"
#include "trainer/seqlen_balancing.h"
#include "workers/sequences.h"
#include "workers/worker_contract.h"

namespace rlcore::trainer {
namespace {

const std::vector<std::string> kEngineColumns = {columns::kInputIds, columns::kAttentionMask, columns::kPositionIds,
                                                 columns::kResponses, columns::kResponseMask};

std::vector<std::string> with_engine_columns(std::vector<std::string> extra) {
  extra.insert(extra.end(), kEngineColumns.begin(), kEngineColumns.end());
  return extra;
}

// How often the trainer's old-log-prob pass routed a token to other experts
// than the rollout did (rlcore's metric, docs/moe.md): the share of the
// (token, sparse layer) pairs the rollout recorded whose expert sets differ.
// 0 under R3, whose pass replays the rollout's routing.
void add_routing_mismatch(const at::Tensor& rollout, const at::Tensor& trainer, StepMetrics& metrics) {
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
void add_greedy_baselines(RlRun& run, Batch& batch, const std::vector<const data::Example*>& examples) {
  workers::Sampling greedy = run.train_sampling(run.step);
  greedy.greedy = true;
  const int64_t n = run.config.actor_rollout_ref.rollout.n;
  std::vector<const data::Example*> prompts;
  for (size_t row = 0; row < examples.size(); row += static_cast<size_t>(n)) prompts.push_back(examples[row]);
  const Rollout baseline = run.generate(prompts, 1, greedy);
  const Rewards scored = run.score(baseline);
  at::Tensor baselines = at::empty({batch.size()}, at::kFloat);
  for (int64_t row = 0; row < batch.size(); ++row) baselines[row] = scored.scores[row / n];
  batch.set(columns::kRewardBaselines, baselines);
}

// verl's decoupled rollout correction, between the rewards and the
// advantages: rejection sampling narrows response_mask, importance weights
// go to the policy loss, and the rollout_corr/ metrics (the off-policy gap)
// are reported every step.
void apply_rollout_correction(const config::RunConfig& config, Batch& batch, StepMetrics& metrics) {
  const RolloutCorrectionResult corrected =
      compute_rollout_correction(batch.tensor(columns::kOldLogProbs), batch.tensor(columns::kRolloutLogProbs),
                                 batch.tensor(columns::kResponseMask), config.algorithm.rollout_correction.settings());
  batch.set(columns::kResponseMask, corrected.response_mask);
  if (corrected.rollout_is_weights.defined()) batch.set(columns::kRolloutIsWeights, corrected.rollout_is_weights);
  metrics.insert(corrected.metrics.begin(), corrected.metrics.end());
}

void compute_advantages(RlRun& run, Batch& batch, StepMetrics& metrics) {
  const config::RunConfig& config = run.config;
  const at::Tensor mask = batch.tensor(columns::kResponseMask);
  if (config.algorithm.use_kl_in_reward) {
    const KlInRewardResult kl =
        apply_kl_penalty(batch.tensor(columns::kTokenLevelScores), batch.tensor(columns::kOldLogProbs),
                         batch.tensor(columns::kRefLogProb), mask, *run.kl_controller, config.algorithm.kl_penalty);
    batch.set(columns::kTokenLevelRewards, kl.token_level_rewards);
    metrics["actor/reward_kl_penalty"] = kl.current_kl;
    metrics["actor/reward_kl_penalty_coeff"] = kl.beta;
  } else {
    batch.set(columns::kTokenLevelRewards, batch.tensor(columns::kTokenLevelScores));
  }
  apply_rollout_correction(config, batch, metrics);
  const AdvantageOutput advantages = run.estimator->compute(advantage_input_from_batch(batch, columns::kUid));
  batch.set(columns::kAdvantages, advantages.advantages.to(at::kFloat));
  batch.set(columns::kReturns, advantages.returns.to(at::kFloat));
}

}  // namespace

RolloutWorkers RlRun::rollout_workers() const {
  return rollout_pool ? rollout_pool->workers() : trainer::colocated_rollout(workers->actor());
}
int64_t RlRun::rollout_version() const { return rollout_pool ? rollout_pool->version() : step; }

Rollout RlRun::generate(const std::vector<const data::Example*>& prompts, int64_t n,
                        const workers::Sampling& sampling) {
  return trainer::generate_rollout(rollout_workers(), prompts, n, sampling, limits, rollout_version());
}

workers::Sampling RlRun::train_sampling(int64_t for_step, int64_t gen_batch) const {
  constexpr int64_t kGenBatchStride = 104729;  // a prime far from the step increments
  const auto& rollout = config.actor_rollout_ref.rollout;
  workers::Sampling sampling;
  sampling.temperature = rollout.temperature;
  sampling.top_k = rollout.top_k;
  sampling.top_p = rollout.top_p;
  sampling.seed = config.data.seed * 1000003 + for_step + gen_batch * kGenBatchStride;
  return sampling;
}

Rewards RlRun::score(const Rollout& rollout) {
  std::optional<trainer::ModelScores> model;
  if (reward_model) model = reward_model->score(*workers->reward_model(), rollout.batch, rollout.examples);
  return trainer::compute_rewards(rollout.batch, rollout.examples, tokenizer, rewards,
                                  trainer::overlong_shaping(config), model ? &*model : nullptr,
                                  rollout.extra_info.empty() ? nullptr : &rollout.extra_info);
}

ScoredRollout RlRun::generate_and_score(const std::vector<int64_t>& indices, int64_t gen_batch, int64_t for_step,
                                        StepMetrics& metrics) {
  std::vector<const data::Example*> prompts;
  for (int64_t index : indices) prompts.push_back(&train_set.at(index));
  trainer::ScoredRollout scored;
  auto start = Clock::now();
  scored.rollout = generate(prompts, config.actor_rollout_ref.rollout.n, train_sampling(for_step, gen_batch));
  metrics[metric_names::kTimingGen] += seconds_since(start);
  fault_point("trainer.generated");
  trainer::add_rollout_metrics(metrics, scored.rollout.engine_stats,
                               scored.rollout.batch.tensor(columns::kResponseMask).sum().item<double>());
  for (const auto& [name, value] : scored.rollout.agent_metrics) metrics[name] = value;
  start = Clock::now();
  scored.rewards = score(scored.rollout);
  metrics["timing_s/reward"] += seconds_since(start);
  return scored;
}

StepMetrics RlRun::train_on(ScoredRollout scored, StepMetrics metrics, Clock::time_point step_start) {
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
  }
  add_score_extra_metrics(scored.rewards.extras, metrics);
  if (plan.needs.reward_baselines) {
    timed("gen_max", [&] { add_greedy_baselines(*this, batch, rollout.examples); });
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
  add_rollout_probs_diff(batch, metrics, config.trainer.check_exact_logprobs, step + 1, step);

  timed("adv", [&] { compute_advantages(*this, batch, metrics); });

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
      add_weight_sync_metrics(synced, metrics);
    });
  add_end_of_step_metrics(batch, step_start, plan.actor_workers, metrics);
  return metrics;
}

}  // namespace rlcore::trainer
