// Private to the core: one RL run as the controller holds it (data, engines,
// workers, the step counter) and the step every async_training.mode shares
// (rl_step.cc); the loops that drive it are sync_loop.cc, one_step_off_loop.cc
// and fully_async_loop.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "rlcore/advantage_estimator.h"
#include "rlcore/core/data/sampler.h"
#include "rlcore/core/metrics/metrics.h"
#include "rlcore/core/trainer/reward_router.h"
#include "rlcore/core/trainer/rl_trainer.h"
#include "rlcore/kl_controller.h"
#include "trainer/batch_plan.h"
#include "trainer/checkpoint.h"
#include "trainer/dynamic_sampling.h"
#include "trainer/generation.h"
#include "trainer/reward_model.h"
#include "trainer/rewards.h"
#include "trainer/rollout_pool.h"
#include "trainer/step_metrics.h"
#include "trainer/streaming_rollout.h"
#include "trainer/trainer_workers.h"
#include "trainer/validation.h"

namespace rlcore::trainer {

using Clock = std::chrono::steady_clock;

struct RlRun {
  // Validates how the batch sizes relate, loads the datasets and starts the worker groups.
  RlRun(const Registry& registry, const config::ResolvedConfig& resolved_config,
        const std::vector<std::string>& plugin_paths, std::ostream& console);
  RlRun(const RlRun&) = delete;  // `config` refers into `resolved`
  RlRun& operator=(const RlRun&) = delete;

  const Registry& components;
  config::ResolvedConfig resolved;
  const config::RunConfig& config;
  std::ostream& out;
  Tokenizer tokenizer;
  std::shared_ptr<const agent::AgentLoop> agent_loop;  // null unless multi_turn.enable
  data::Dataset train_set;
  data::Dataset val_set;
  BatchPlan plan;
  std::unique_ptr<data::EpochSampler> sampler;
  std::shared_ptr<AdvantageEstimator> estimator;
  std::unique_ptr<KlController> kl_controller;
  RewardRouter rewards;
  CheckpointStore checkpoints;
  std::unique_ptr<RewardModel> reward_model;  // null without reward.reward_model.enable
  std::unique_ptr<TrainerWorkers> workers;
  metrics::MetricsLogger logger;
  GenerationLimits limits;
  std::unique_ptr<Validator> validator;
  std::unique_ptr<RolloutPool> rollout_pool;                 // async_training.mode one_step_off / fully_async
  std::optional<data::SamplerState> sampler_before_pending;  // the sampler before the background batch was drawn
  StreamingRollout* streaming = nullptr;                     // while fully_async runs
  int64_t step = 0;
  int64_t resumed_from = 0;

  // ---- generation and rewards (rl_step.cc) ------------------------------------

  RolloutWorkers rollout_workers() const;
  // The weight version the rollout generates with: the colocated rollout's is the step.
  int64_t rollout_version() const;
  Rollout generate(const std::vector<const data::Example*>& prompts, int64_t n, const workers::Sampling& sampling);
  // `gen_batch` numbers the generation batches of one step (dynamic sampling
  // draws more than one), so each gets its own random stream.
  workers::Sampling train_sampling(int64_t for_step, int64_t gen_batch = 0) const;
  // The rule graders' and (reward.reward_model) the reward model's rewards of a rollout.
  Rewards score(const Rollout& rollout);
  // Generation and rewards of one batch of prompts (their times add up over
  // the batches of a step with dynamic sampling).
  // `for_step`: the step the batch is for (its sampling seed).
  ScoredRollout generate_and_score(const std::vector<int64_t>& indices, int64_t gen_batch, int64_t for_step,
                                   StepMetrics& metrics);

  // ---- the shared step (rl_step.cc) ---------------------------------------------

  // Everything of a step after its batch is generated and scored: log-probs,
  // advantages, the updates, and (colocated) the hybrid engine's version.
  StepMetrics train_on(ScoredRollout scored, StepMetrics metrics, Clock::time_point step_start);

  // ---- around the steps (rl_trainer.cc) -------------------------------------------

  // A standalone rollout pool gets the step's weights first (it must not be generating).
  StepMetrics validate();
  // A standalone rollout pool gets the actor's weights before a loop's first step (a resumed run's).
  void sync_pool_before_first_step();
  // After a step's update: validation and a checkpoint when due, then the
  // metrics logged. `before_validation` and `after_validation` run around a
  // due validation (the rollout pool must be done with its background work).
  // Returns true to stop (trainer.stop_at_val_reward reached).
  bool finish_step(StepMetrics& metrics, FitSummary& summary, const std::function<void()>& before_validation,
                   const std::function<void()>& after_validation);
  std::string save_checkpoint();
  std::optional<std::string> checkpoint_to_resume() const;
  void resume();

 private:
  static Tokenizer load_tokenizer(const config::RunConfig& config);
  data::Dataset load_dataset(const std::vector<std::string>& files, const std::string& key) const;
};

// async_training.mode sync (sync_loop.cc): generate, score and train each step
// on the colocated hybrid engine.
void run_sync_loop(RlRun& run, FitSummary& summary);
// async_training.mode one_step_off (one_step_off_loop.cc).
void run_one_step_off_loop(RlRun& run, FitSummary& summary);
// async_training.mode fully_async (fully_async_loop.cc).
void run_fully_async_loop(RlRun& run, FitSummary& summary);

}  // namespace rlcore::trainer
