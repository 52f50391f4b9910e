// Schema of actor_rollout_ref.rollout (see rollout_config.h).
#include "rlcore/core/config/rollout_config.h"

namespace rlcore::config {
namespace {

OptionsSchema<ValidationSampling> val_kwargs_schema() {
  OptionsSchema<ValidationSampling> schema;
  schema.key("n", &ValidationSampling::n, "Responses per validation prompt (mean@n).", at_least(1))
      .key("temperature", &ValidationSampling::temperature, "Validation temperature (with do_sample).", at_least(0))
      .key("top_k", &ValidationSampling::top_k, "Validation top-k (-1: off).")
      .key("top_p", &ValidationSampling::top_p, "Validation top-p.", in_range(0, 1))
      .key("do_sample", &ValidationSampling::do_sample, "Sample in validation; false: greedy.");
  return schema;
}

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
      .key("ignore_eos", &RolloutConfig::ignore_eos,
           "Generation does not stop at the EOS token: every response (validation too) runs to "
           "data.max_response_length (verl passes it to vLLM's SamplingParams). Not with vllm_bridge.")
      .key("log_prob_micro_batch_size_per_gpu", &RolloutConfig::log_prob_micro_batch_size_per_gpu,
           "Responses per forward when computing old log-probs on one worker; 0: all at once.", at_least(0))
      .key("log_prob_use_dynamic_bsz", &RolloutConfig::log_prob_use_dynamic_bsz, "Token-budget micro-batches.")
      .key("log_prob_max_token_len_per_gpu", &RolloutConfig::log_prob_max_token_len_per_gpu,
           "Token budget with log_prob_use_dynamic_bsz.", at_least(1))
      .section("val_kwargs", &RolloutConfig::val_kwargs, val_kwargs_schema())
      .key("sharding_manager", &RolloutConfig::sharding_manager,
           "How weights move between actor and rollout (a registered sharding_manager).")
      .section("multi_turn", &RolloutConfig::multi_turn, agent::multi_turn_schema())
      .section("agent", &RolloutConfig::agent, agent::agent_section_schema())
      .section("checkpoint_engine", &RolloutConfig::checkpoint_engine, checkpoint_engine_schema())
      .key("enable_rollout_routing_replay", &RolloutConfig::enable_rollout_routing_replay,
           "The rollout records the experts each token was routed to (the routed_experts column), for "
           "actor.router_replay.mode R3 and the training/rollout_routing_mismatch metric; the inference engine must "
           "have the records_routing capability (infer-native). Single-turn synchronous rollouts only.")
      .key("exact_logprobs", &RolloutConfig::exact_logprobs,
           "The rollout and the trainer run the model's batch-invariant forward (fp32 on the CPU), so the "
           "rollout's log-probs equal the trainer's old log-probs bit for bit (training/rollout_probs_diff_max 0). "
           "Not in verl. What it covers: docs/exact-logprobs.md.")
      .other_keys_to(&RolloutConfig::engine_options);
  return schema;
}

}  // namespace rlcore::config
