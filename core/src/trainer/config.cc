// Schemas of the RL trainer's config sections (see trainer_config.h).
#include "rlcore/core/trainer/trainer_config.h"

#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "rlcore/rl_functional.h"

namespace rlcore::trainer {
namespace {

constexpr const char* kUseRemovePaddingDoc =
    "Train-engine micro-batches packed without padding (each row's real tokens back to back, attention kept "
    "within each row): the padded path's numbers without its compute. Sets the engine's use_remove_padding "
    "when false (the engines' default is true; docs/trainer.md#packing).";

OptionsSchema<ModelPathConfig> model_path_schema(const std::string& doc) {
  OptionsSchema<ModelPathConfig> schema;
  schema.key("path", &ModelPathConfig::path, doc)
      .key("use_remove_padding", &ModelPathConfig::use_remove_padding, kUseRemovePaddingDoc);
  return schema;
}

OptionsSchema<ActorModelConfig> actor_model_schema() {
  OptionsSchema<ActorModelConfig> schema;
  schema.key("path", &ActorModelConfig::path, "HF checkpoint directory the actor, reference and rollout start from.")
      .key("lora_rank", &ActorModelConfig::lora_rank,
           "LoRA rank r; 0 trains the whole model. > 0 freezes the base weights and trains rank-r adapters "
           "(handed to the actor's train engine as its lora options; the engine needs the low_rank_adapters "
           "capability).",
           at_least(0))
      .key("lora_alpha", &ActorModelConfig::lora_alpha,
           "LoRA alpha: adapter outputs are scaled by lora_alpha / lora_rank.", greater_than(0))
      .key("target_modules", &ActorModelConfig::target_modules,
           "Projections that get adapters: all-linear (every projection of every decoder layer), module names "
           "(q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj) or regular expressions over full module "
           "names (model.layers.0.self_attn.q_proj).",
           {}, read_one_or_many)
      .key("exclude_modules", &ActorModelConfig::exclude_modules,
           "Modules taken out of target_modules, in the same forms (e.g. down_proj, or '.*layers\\.0\\..*'); an "
           "entry that selects no module is an error.",
           {}, read_one_or_many)
      .key("lora_adapter_path", &ActorModelConfig::lora_adapter_path,
           "A PEFT adapter directory to continue training from (e.g. `rlcore sft`'s hf/lora_adapter): turns LoRA "
           "on with the adapter's r, lora_alpha and modules (lora_rank, when set, must agree). The reference "
           "policy stays the base model, as in verl.")
      .key("use_remove_padding", &ActorModelConfig::use_remove_padding,
           std::string(kUseRemovePaddingDoc) + " Applies to the actor and the reference policy.");
  return schema;
}

OptionsSchema<ValidationSampling> val_kwargs_schema() {
  OptionsSchema<ValidationSampling> schema;
  schema.key("n", &ValidationSampling::n, "Responses per validation prompt (mean@n).", at_least(1))
      .key("temperature", &ValidationSampling::temperature, "Validation temperature (with do_sample).", at_least(0))
      .key("top_k", &ValidationSampling::top_k, "Validation top-k (-1: off).")
      .key("top_p", &ValidationSampling::top_p, "Validation top-p.", in_range(0, 1))
      .key("do_sample", &ValidationSampling::do_sample, "Sample in validation; false: greedy.");
  return schema;
}

OptionsSchema<PolicyLossSection> policy_loss_schema() {
  OptionsSchema<PolicyLossSection> schema;
  schema
      .key("loss_mode", &PolicyLossSection::loss_mode,
           "Policy loss (a registered policy_loss: vanilla, gspo, clip_cov, kl_cov, cispo, gpg, geo_mean); its options "
           "live here too.")
      .other_keys_to(&PolicyLossSection::options);
  return schema;
}

OptionsSchema<RouterReplayConfig> router_replay_schema() {
  OptionsSchema<RouterReplayConfig> schema;
  schema.key("mode", &RouterReplayConfig::mode,
             "Routing replay of a mixture of experts (docs/moe.md): disabled; R2: the update replays the routing "
             "of the old-log-prob pass; R3: both passes replay the rollout's (needs "
             "rollout.enable_rollout_routing_replay). The train engine must have the routing_replay capability.",
             one_of({"disabled", "R2", "R3"}));
  return schema;
}

}  // namespace

OptionsSchema<ActorConfig> actor_schema() {
  OptionsSchema<ActorConfig> schema;
  schema.key("strategy", &ActorConfig::strategy, "Train engine of the actor (a registered train_engine, e.g. fsdp).")
      .key("ppo_mini_batch_size", &ActorConfig::ppo_mini_batch_size,
           "Prompts per optimizer step; each brings rollout.n responses. Must divide data.train_batch_size.",
           at_least(1))
      .key("ppo_micro_batch_size_per_gpu", &ActorConfig::ppo_micro_batch_size_per_gpu,
           "Responses per forward/backward on one worker (gradient accumulation); 0: the worker's whole mini-batch.",
           at_least(0))
      .key("use_dynamic_bsz", &ActorConfig::use_dynamic_bsz,
           "Pack micro-batches up to ppo_max_token_len_per_gpu tokens instead of a fixed row count.")
      .key("ppo_max_token_len_per_gpu", &ActorConfig::ppo_max_token_len_per_gpu,
           "Token budget of a micro-batch with use_dynamic_bsz.", at_least(1))
      .key("ppo_epochs", &ActorConfig::ppo_epochs, "Passes over each step's batch.", at_least(1))
      .key("clip_ratio", &ActorConfig::clip_ratio, "PPO clip range (both sides unless the next two are set).",
           greater_than(0))
      .key("clip_ratio_low", &ActorConfig::clip_ratio_low, "Lower clip range: ratio >= 1 - clip_ratio_low.",
           at_least(0))
      .key("clip_ratio_high", &ActorConfig::clip_ratio_high, "Upper clip range: ratio <= 1 + clip_ratio_high.",
           at_least(0))
      .key("clip_ratio_c", &ActorConfig::clip_ratio_c, "Dual-clip bound for negative advantages (> 1).",
           greater_than(1))
      .key("tau_pos", &ActorConfig::tau_pos, "SAPO's gate temperature for positive advantages.", greater_than(0))
      .key("tau_neg", &ActorConfig::tau_neg, "SAPO's gate temperature for negative advantages.", greater_than(0))
      .key("loss_agg_mode", &ActorConfig::loss_agg_mode, "How token losses become one number.",
           one_of(loss_agg_modes()))
      .key("entropy_coeff", &ActorConfig::entropy_coeff, "Entropy bonus coefficient (loss -= coeff * entropy).")
      .key("use_kl_loss", &ActorConfig::use_kl_loss, "Add kl_loss_coef * KL(actor || ref) to the loss (GRPO style).")
      .key("kl_loss_coef", &ActorConfig::kl_loss_coef, "Coefficient of the KL loss.", at_least(0))
      .key("kl_loss_type", &ActorConfig::kl_loss_type, "KL estimator of the KL loss.", one_of(kl_penalty_types()))
      .key("calculate_sum_pi_squared", &ActorConfig::calculate_sum_pi_squared,
           "The old-log-prob pass also computes sum_pi_squared (the sum over the vocabulary of each token's "
           "squared probability), which optimal_token_baseline and tir_optimal_token_baseline need and which "
           "adds the variance_proxy/ metrics; the train engine must have the sum_pi_squared capability.")
      .section("policy_loss", &ActorConfig::policy_loss, policy_loss_schema())
      .section("router_replay", &ActorConfig::router_replay, router_replay_schema())
      .other_keys_to(&ActorConfig::engine_options);
  return schema;
}

OptionsSchema<RefConfig> ref_schema() {
  OptionsSchema<RefConfig> schema;
  schema.key("strategy", &RefConfig::strategy, "Train engine of the frozen reference policy.")
      .key("log_prob_micro_batch_size_per_gpu", &RefConfig::log_prob_micro_batch_size_per_gpu,
           "Responses per forward on one worker; 0: all at once.", at_least(0))
      .key("log_prob_use_dynamic_bsz", &RefConfig::log_prob_use_dynamic_bsz, "Token-budget micro-batches.")
      .key("log_prob_max_token_len_per_gpu", &RefConfig::log_prob_max_token_len_per_gpu,
           "Token budget with log_prob_use_dynamic_bsz.", at_least(1))
      .other_keys_to(&RefConfig::engine_options);
  return schema;
}

namespace {

OptionsSchema<CheckpointEngineConfig> checkpoint_engine_schema() {
  OptionsSchema<CheckpointEngineConfig> schema;
  schema.key("update_weights_bucket_megabytes", &CheckpointEngineConfig::update_weights_bucket_megabytes,
             "Megabytes of parameters per broadcast from the actor to a standalone rollout pool.", at_least(1));
  return schema;
}

}  // namespace

OptionsSchema<RolloutConfig> rollout_schema() {
  OptionsSchema<RolloutConfig> schema;
  schema.key("name", &RolloutConfig::name, "Inference engine that generates (a registered inference_engine).")
      .key("n", &RolloutConfig::n, "Responses per prompt (GRPO/RLOO groups).", at_least(1))
      .key("temperature", &RolloutConfig::temperature, "Sampling temperature; also used for old log-probs.",
           greater_than(0))
      .key("top_k", &RolloutConfig::top_k, "Top-k sampling (-1: off).")
      .key("top_p", &RolloutConfig::top_p, "Nucleus sampling.", in_range(0, 1))
      .key("log_prob_micro_batch_size_per_gpu", &RolloutConfig::log_prob_micro_batch_size_per_gpu,
           "Responses per forward when computing old log-probs on one worker; 0: all at once.", at_least(0))
      .key("log_prob_use_dynamic_bsz", &RolloutConfig::log_prob_use_dynamic_bsz, "Token-budget micro-batches.")
      .key("log_prob_max_token_len_per_gpu", &RolloutConfig::log_prob_max_token_len_per_gpu,
           "Token budget with log_prob_use_dynamic_bsz.", at_least(1))
      .section("val_kwargs", &RolloutConfig::val_kwargs, val_kwargs_schema())
      .key("sharding_manager", &RolloutConfig::sharding_manager,
           "How weights move between actor and rollout (a registered sharding_manager: bucketed | naive).")
      .section("multi_turn", &RolloutConfig::multi_turn, agent::multi_turn_schema())
      .section("agent", &RolloutConfig::agent, agent::agent_section_schema())
      .section("checkpoint_engine", &RolloutConfig::checkpoint_engine, checkpoint_engine_schema())
      .key("enable_rollout_routing_replay", &RolloutConfig::enable_rollout_routing_replay,
           "The rollout records the experts each token was routed to (the routed_experts column), for "
           "actor.router_replay.mode R3 and the training/rollout_routing_mismatch metric; the inference engine must "
           "have the records_routing capability (infer-native). Single-turn synchronous rollouts only.")
      .other_keys_to(&RolloutConfig::engine_options);
  return schema;
}

OptionsSchema<AsyncTrainingConfig> async_training_schema() {
  OptionsSchema<AsyncTrainingConfig> schema;
  schema
      .key("mode", &AsyncTrainingConfig::mode,
           "sync: generate, then train, on the actor's workers (the hybrid engine); one_step_off: a standalone "
           "rollout pool generates the next step's batch while the actor trains on this one; fully_async: the pool "
           "generates continuously, request by request, within a staleness budget (docs/async.md).",
           one_of({"sync", "one_step_off", "fully_async"}))
      .key("staleness_threshold", &AsyncTrainingConfig::staleness_threshold,
           "fully_async: after a sync the rollout may start (1 + this) x trigger_parameter_sync_step x "
           "data.train_batch_size prompts, less those not yet trained on; 0: none ahead of the window.",
           at_least(0))
      .key("trigger_parameter_sync_step", &AsyncTrainingConfig::trigger_parameter_sync_step,
           "fully_async: steps (updates) between weight syncs to the rollout pool.", at_least(1))
      .key("partial_rollout", &AsyncTrainingConfig::partial_rollout,
           "fully_async: a sync reaches the requests in flight (their later tokens sampled by the new weights); "
           "false: they finish under the old weights first.")
      .key("decode_steps_per_call", &AsyncTrainingConfig::decode_steps_per_call,
           "fully_async (rlcore's key): decode steps the pool runs per call before reporting finished samples; a "
           "sync or a validation waits at most that long for the pool.",
           at_least(1))
      .key("max_staleness", &AsyncTrainingConfig::max_staleness,
           "fully_async (rlcore's key, prime-rl's max_off_policy_steps): a prompt with a sample token sampled more "
           "than this many updates before the step is dropped, not trained on (async/stale_dropped), and the pool "
           "starts another in its place; -1: none, the staleness budget alone bounds staleness (the producer waits).",
           at_least(-1));
  return schema;
}

OptionsSchema<RolloutPoolConfig> rollout_pool_schema() {
  OptionsSchema<RolloutPoolConfig> schema;
  schema
      .key("nnodes", &RolloutPoolConfig::nnodes, "Nodes of the standalone rollout pool (async_training.mode).",
           at_least(1))
      .key("n_gpus_per_node", &RolloutPoolConfig::n_gpus_per_node,
           "Workers per node of the standalone rollout pool: GPUs, or processes with trainer.device cpu.", at_least(1));
  return schema;
}

namespace {

// A copy of a section's engine keys ({} when it has none).
ConfigNode engine_keys(const ConfigNode& section, const std::string& path) {
  return section.defined() && !section.is_null() ? section.clone() : ConfigNode::parse("{}", path);
}

// model.use_remove_padding: false turns the engine's packing off.
ConfigNode with_remove_padding(ConfigNode options, bool use_remove_padding, const std::string& model_key,
                               const std::string& section) {
  if (use_remove_padding) return options;
  if (options.has("use_remove_padding") && options["use_remove_padding"].as<bool>()) {
    throw ConfigError("use_remove_padding is set twice: " + model_key + " = false and " + section +
                      ".use_remove_padding = true; keep one");
  }
  options.set("use_remove_padding", "false", model_key);
  return options;
}

}  // namespace

ConfigNode ref_engine_options(const ActorRolloutRefConfig& config) {
  ConfigNode options = with_remove_padding(engine_keys(config.ref.engine_options, "actor_rollout_ref.ref"),
                                           config.model.use_remove_padding,
                                           "actor_rollout_ref.model.use_remove_padding", "actor_rollout_ref.ref");
  // verl's ref.ulysses_sequence_parallel_size defaults to the actor's: they share the workers.
  const char* kSp = "ulysses_sequence_parallel_size";
  const ConfigNode& actor = config.actor.engine_options;
  if (!options.has(kSp) && actor.defined() && actor.has(kSp) && config.ref.strategy == config.actor.strategy)
    options.set(kSp, std::to_string(actor[kSp].as<int64_t>()), "actor_rollout_ref.actor." + std::string(kSp));
  return options;
}

ConfigNode critic_engine_options(const CriticConfig& config) {
  return with_remove_padding(engine_keys(config.engine_options, "critic"), config.model.use_remove_padding,
                             "critic.model.use_remove_padding", "critic");
}

ConfigNode actor_engine_options(const ActorRolloutRefConfig& config) {
  ConfigNode options = with_remove_padding(engine_keys(config.actor.engine_options, "actor_rollout_ref.actor"),
                                           config.model.use_remove_padding,
                                           "actor_rollout_ref.model.use_remove_padding", "actor_rollout_ref.actor");
  const ActorModelConfig& model = config.model;
  if (!model.lora()) return options;
  if (options.has("lora"))
    throw ConfigError(
        "LoRA is set twice: actor_rollout_ref.model.lora_rank / lora_adapter_path (verl's keys) and "
        "actor_rollout_ref.actor.lora; keep one");
  const std::string source = "actor_rollout_ref.model";
  options.set("lora.lora_rank", std::to_string(model.lora_rank), source);
  options.set("lora.lora_alpha", nlohmann::json(model.lora_alpha).dump(), source);
  options.set("lora.target_modules", nlohmann::json(model.target_modules).dump(), source);
  if (!model.exclude_modules.empty())
    options.set("lora.exclude_modules", nlohmann::json(model.exclude_modules).dump(), source);
  if (!model.lora_adapter_path.empty())
    options.set("lora.lora_adapter_path", nlohmann::json(model.lora_adapter_path).dump(), source);
  return options;
}

std::string weight_adaptor_for(const ActorRolloutRefConfig& config) {
  if (!config.hybrid_engine.weight_adaptor.empty()) return config.hybrid_engine.weight_adaptor;
  return config.actor.strategy == "megatron" ? "megatron" : "identity";
}

OptionsSchema<HybridEngineConfig> hybrid_engine_schema() {
  OptionsSchema<HybridEngineConfig> schema;
  schema
      .key("weight_adaptor", &HybridEngineConfig::weight_adaptor,
           "Actor -> rollout layout (a weight_adaptor); empty: megatron for actor.strategy megatron, else identity.")
      .key("offloader", &HybridEngineConfig::offloader, "Moves actor state to host during rollout (an offloader).")
      .other_keys_to(&HybridEngineConfig::options);
  return schema;
}

OptionsSchema<ActorRolloutRefConfig> actor_rollout_ref_schema() {
  OptionsSchema<ActorRolloutRefConfig> schema;
  schema.section("model", &ActorRolloutRefConfig::model, actor_model_schema())
      .section("actor", &ActorRolloutRefConfig::actor, actor_schema())
      .section("ref", &ActorRolloutRefConfig::ref, ref_schema())
      .section("rollout", &ActorRolloutRefConfig::rollout, rollout_schema())
      .section("hybrid_engine", &ActorRolloutRefConfig::hybrid_engine, hybrid_engine_schema());
  return schema;
}

OptionsSchema<CriticConfig> critic_schema() {
  OptionsSchema<CriticConfig> schema;
  schema
      .key("enable", &CriticConfig::enable, "Run a critic: auto (when the estimator needs values), true, false.",
           one_of({"auto", "true", "false"}))
      .key("strategy", &CriticConfig::strategy, "Train engine of the critic.")
      .section("model", &CriticConfig::model,
               model_path_schema("Critic checkpoint; empty: the actor's model with a fresh value head."))
      .key("ppo_mini_batch_size", &CriticConfig::ppo_mini_batch_size, "Prompts per critic step; 0: the actor's.",
           at_least(0))
      .key("ppo_micro_batch_size_per_gpu", &CriticConfig::ppo_micro_batch_size_per_gpu,
           "Responses per forward/backward on one worker; 0: all at once.", at_least(0))
      .key("forward_micro_batch_size_per_gpu", &CriticConfig::forward_micro_batch_size_per_gpu,
           "Responses per value forward on one worker; 0: all at once.", at_least(0))
      .key("use_dynamic_bsz", &CriticConfig::use_dynamic_bsz, "Token-budget micro-batches.")
      .key("ppo_max_token_len_per_gpu", &CriticConfig::ppo_max_token_len_per_gpu, "Token budget with use_dynamic_bsz.",
           at_least(1))
      .key("ppo_epochs", &CriticConfig::ppo_epochs, "Passes over each batch; 0: the actor's.", at_least(0))
      .key("cliprange_value", &CriticConfig::cliprange_value, "Value clipping range.", greater_than(0))
      .key("loss_agg_mode", &CriticConfig::loss_agg_mode, "Aggregation of the value loss.", one_of(loss_agg_modes()))
      .other_keys_to(&CriticConfig::engine_options);
  return schema;
}

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

}  // namespace rlcore::trainer
