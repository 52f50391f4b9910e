// The RL trainer's config sections, with verl's key names and defaults:
// actor_rollout_ref.{model, actor, ref, rollout}, critic, algorithm. Sections
// that configure a component as well (the actor's train engine, the rollout's
// inference engine, the advantage estimator) accept the component's keys too;
// those are kept in the section's engine_options / estimator_options and
// validated by the component.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rlcore/config_node.h"
#include "rlcore/core/agent/agent_config.h"
#include "rlcore/export.h"
#include "rlcore/kl_controller.h"
#include "rlcore/options.h"
#include "rlcore/rollout_correction.h"
#include "rlcore/train_engine.h"

namespace rlcore::trainer {

struct ModelPathConfig {
  std::string path;  // HF checkpoint directory (config.json, weights, tokenizer)
  // false: the train engine pads micro-batches instead of packing them (its use_remove_padding).
  bool use_remove_padding = true;
};

// actor_rollout_ref.model: the checkpoint, and verl's LoRA keys, which the
// trainer hands to the actor's train engine as its `lora` options.
struct ActorModelConfig {
  std::string path;
  int64_t lora_rank = 0;  // 0: LoRA off (unless lora_adapter_path is set)
  double lora_alpha = 16;
  std::vector<std::string> target_modules = {"all-linear"};
  std::vector<std::string> exclude_modules;
  std::string lora_adapter_path;  // a PEFT adapter to start from; LoRA is on with its rank
  // false: the actor's and the reference's train engines pad micro-batches
  // instead of packing them (their use_remove_padding).
  bool use_remove_padding = true;

  bool lora() const { return lora_rank > 0 || !lora_adapter_path.empty(); }
};

// actor.router_replay (verl's): routing replay for a mixture of experts
// (docs/moe.md): disabled; R2 replays in the update the routing the
// old-log-prob pass chose; R3 replays the rollout's in both passes.
struct RouterReplayConfig {
  std::string mode = "disabled";  // disabled | R2 | R3
  bool replays() const { return mode != "disabled"; }
};

// actor.policy_loss: the loss's name and its own keys.
struct PolicyLossSection {
  std::string loss_mode = "vanilla";  // a registered policy_loss
  ConfigNode options;                 // every other key of the section
};

struct ActorConfig {
  std::string strategy = "fsdp";             // the train_engine to build
  int64_t ppo_mini_batch_size = 256;         // prompts per optimizer step (x rollout.n responses)
  int64_t ppo_micro_batch_size_per_gpu = 0;  // 0: a worker's whole mini-batch at once
  bool use_dynamic_bsz = false;
  int64_t ppo_max_token_len_per_gpu = 16384;
  int64_t ppo_epochs = 1;
  double clip_ratio = 0.2;
  double clip_ratio_low = 0.2;
  double clip_ratio_high = 0.2;
  double clip_ratio_c = 3.0;
  double tau_pos = 1.0;   // SAPO's gate temperature for positive advantages
  double tau_neg = 1.05;  // and for negative ones
  std::string loss_agg_mode = "token-mean";
  double entropy_coeff = 0.0;
  bool use_kl_loss = false;
  double kl_loss_coef = 0.001;
  std::string kl_loss_type = "low_var_kl";
  bool calculate_sum_pi_squared = false;  // old_log_prob also gives Σπ² per token (optimal token baseline)
  PolicyLossSection policy_loss;
  RouterReplayConfig router_replay;
  ConfigNode engine_options;  // the train engine's keys (optim, fsdp_config, grad_clip, ...)
};

struct RefConfig {
  std::string strategy = "fsdp";
  int64_t log_prob_micro_batch_size_per_gpu = 0;
  bool log_prob_use_dynamic_bsz = false;
  int64_t log_prob_max_token_len_per_gpu = 16384;
  ConfigNode engine_options;
};

struct ValidationSampling {
  int64_t n = 1;
  double temperature = 0.0;
  int64_t top_k = -1;
  double top_p = 1.0;
  bool do_sample = false;  // false: greedy whatever the temperature
};

// verl's actor_rollout_ref.rollout.checkpoint_engine: the actor's weights to a
// standalone rollout pool (docs/async.md).
struct CheckpointEngineConfig {
  int64_t update_weights_bucket_megabytes = 2048;  // parameters per broadcast over the bridge
};

struct RolloutConfig {
  std::string name = "native";  // the inference_engine to build
  int64_t n = 1;                // responses per prompt
  double temperature = 1.0;
  int64_t top_k = -1;
  double top_p = 1.0;
  int64_t log_prob_micro_batch_size_per_gpu = 0;
  bool log_prob_use_dynamic_bsz = false;
  int64_t log_prob_max_token_len_per_gpu = 16384;
  ValidationSampling val_kwargs;
  std::string sharding_manager = "bucketed";  // the sharding_manager switching actor <-> rollout
  agent::MultiTurnConfig multi_turn;          // verl's multi_turn: the agent loop (docs/agent-loop.md)
  agent::AgentSection agent;
  CheckpointEngineConfig checkpoint_engine;
  bool enable_rollout_routing_replay = false;  // the rollout records each token's experts (routed_experts)
  ConfigNode engine_options;                   // the inference engine's keys (dtype, max_num_seqs, ...)
};

// The hybrid engine's parts (see docs/hybrid-engine.md); `options` are the
// sharding manager's keys (offload_train_param, ...).
struct HybridEngineConfig {
  std::string weight_adaptor;  // empty: chosen by the actor's strategy (weight_adaptor_for)
  std::string offloader = "engine";
  ConfigNode options;
};

struct ActorRolloutRefConfig {
  ActorModelConfig model;
  ActorConfig actor;
  RefConfig ref;
  RolloutConfig rollout;
  HybridEngineConfig hybrid_engine;
};

struct CriticConfig {
  std::string enable = "auto";  // auto (when the estimator needs values) | true | false
  std::string strategy = "fsdp";
  ModelPathConfig model;            // empty: the actor's model (trunk), fresh value head
  int64_t ppo_mini_batch_size = 0;  // 0: the actor's
  int64_t ppo_micro_batch_size_per_gpu = 0;
  int64_t forward_micro_batch_size_per_gpu = 0;
  bool use_dynamic_bsz = false;
  int64_t ppo_max_token_len_per_gpu = 32768;
  int64_t ppo_epochs = 0;  // 0: the actor's
  double cliprange_value = 0.5;
  std::string loss_agg_mode = "token-mean";
  ConfigNode engine_options;
};

// DAPO's dynamic sampling (verl's algorithm.filter_groups): generate more
// batches until data.train_batch_size prompts have groups whose responses
// differ on `metric`.
struct FilterGroupsConfig {
  bool enable = false;
  std::string metric = "reward";    // "reward": the score; else a grader extra ("acc", ...)
  int64_t max_num_gen_batches = 0;  // generation batches per step at most; <= 0: no limit
};

// verl's algorithm.rollout_correction: the SDK's settings (see
// rlcore/rollout_correction.h) plus verl's bypass mode, which rlcore refuses.
struct RolloutCorrectionSection {
  std::string rollout_is;  // "" (off), token, sequence
  std::string rollout_is_threshold = "2.0";
  bool rollout_is_batch_normalize = false;
  std::string rollout_rs;  // "" (off) or comma-separated options
  std::string rollout_rs_threshold;
  bool bypass_mode = false;
  std::string loss_type = "ppo_clip";  // bypass_mode's loss

  RolloutCorrectionConfig settings() const {
    return {rollout_is, rollout_is_threshold, rollout_is_batch_normalize, rollout_rs, rollout_rs_threshold};
  }
};

struct AlgorithmConfig {
  std::string adv_estimator = "gae";
  bool use_kl_in_reward = false;
  std::string kl_penalty = "kl";
  KlControlConfig kl_ctrl;
  FilterGroupsConfig filter_groups;
  RolloutCorrectionSection rollout_correction;
  ConfigNode estimator_options;  // the advantage estimator's keys (gamma, lam, ...)
};

// The actor train engine's keys: actor_rollout_ref.actor's engine keys, plus
// verl's model.lora_rank / lora_alpha / target_modules / exclude_modules /
// lora_adapter_path as `lora` when LoRA is on (model.lora()).
// Throws ConfigError when LoRA is set under both names.
// Also use_remove_padding: false when model.use_remove_padding is false
// (ConfigError when the engine's own key says true).
RLCORE_API ConfigNode actor_engine_options(const ActorRolloutRefConfig& config);
// The reference's and the critic's train-engine keys, with use_remove_padding
// as the actor's; the reference's ulysses_sequence_parallel_size defaults to
// the actor's (verl's default) when both use the same engine.
RLCORE_API ConfigNode ref_engine_options(const ActorRolloutRefConfig& config);
RLCORE_API ConfigNode critic_engine_options(const CriticConfig& config);

// The weight adaptor the hybrid engine uses: hybrid_engine.weight_adaptor when
// set, else the one matching the actor's layout (megatron for the megatron
// strategy, identity for HF-named trainers such as fsdp).
RLCORE_API std::string weight_adaptor_for(const ActorRolloutRefConfig& config);

RLCORE_API OptionsSchema<ActorConfig> actor_schema();
RLCORE_API OptionsSchema<RefConfig> ref_schema();
RLCORE_API OptionsSchema<RolloutConfig> rollout_schema();
RLCORE_API OptionsSchema<HybridEngineConfig> hybrid_engine_schema();
RLCORE_API OptionsSchema<ActorRolloutRefConfig> actor_rollout_ref_schema();
RLCORE_API OptionsSchema<CriticConfig> critic_schema();
RLCORE_API OptionsSchema<AlgorithmConfig> algorithm_schema();

// How rollout and training are scheduled (docs/async.md): verl's
// async_training section; `mode` is rlcore's (verl picks a recipe's entry point).
struct AsyncTrainingConfig {
  std::string mode =
      "sync";  // sync (colocated, the hybrid engine) | one_step_off | fully_async (a standalone rollout pool)
  // fully_async (verl's keys and its recipe's defaults):
  double staleness_threshold = 0.1;         // extra share of a sync window's prompts the rollout may start
  int64_t trigger_parameter_sync_step = 4;  // steps between weight syncs
  bool partial_rollout = true;              // a sync reaches requests in flight (else they finish first)
  int64_t decode_steps_per_call = 16;       // rlcore's: decode steps of each stream call (a sync waits at most that)
  int64_t max_staleness = -1;               // rlcore's: drop a prompt with a token staler than this; -1: none
};

// verl's top-level `rollout` section of its asynchronous recipes: the
// standalone rollout pool's size (workers: GPUs, or processes on the CPU).
struct RolloutPoolConfig {
  int64_t nnodes = 1;
  int64_t n_gpus_per_node = 1;
};

RLCORE_API OptionsSchema<AsyncTrainingConfig> async_training_schema();
RLCORE_API OptionsSchema<RolloutPoolConfig> rollout_pool_schema();

}  // namespace rlcore::trainer
