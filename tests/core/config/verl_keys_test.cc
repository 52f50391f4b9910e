// verl's keys that rlcore has no key of its own for (core/src/config/verl_keys.cc):
// the command lines of verl's GRPO and PPO example scripts resolve unchanged,
// each key moved, noted or refused by name, and the user guide lists every rule.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../cli/cli_testing.h"
#include "config/verl_keys.h"
#include "../../common/test_paths.h"

using cli_test::read_file;
using cli_test::run;

namespace {

// examples/grpo_trainer/run_qwen3-8b.sh and examples/ppo_trainer/run_deepseek7b_llm.sh
// (verl 0.9.1) without their paths, rollout.name=vllm and the wandb logger.
const std::vector<std::string> kVerlGrpo = {"algorithm.adv_estimator=grpo",
                                            "data.train_batch_size=16",
                                            "data.max_prompt_length=64",
                                            "data.max_response_length=32",
                                            "data.filter_overlong_prompts=True",
                                            "data.truncation=error",
                                            "actor_rollout_ref.actor.optim.lr=1e-6",
                                            "actor_rollout_ref.model.use_remove_padding=True",
                                            "actor_rollout_ref.actor.ppo_mini_batch_size=8",
                                            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
                                            "actor_rollout_ref.actor.use_kl_loss=True",
                                            "actor_rollout_ref.actor.kl_loss_coef=0.001",
                                            "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
                                            "actor_rollout_ref.actor.entropy_coeff=0",
                                            "actor_rollout_ref.model.enable_gradient_checkpointing=True",
                                            "actor_rollout_ref.actor.fsdp_config.param_offload=False",
                                            "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False",
                                            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
                                            "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
                                            "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
                                            "actor_rollout_ref.rollout.n=5",
                                            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4",
                                            "actor_rollout_ref.ref.fsdp_config.param_offload=True",
                                            "algorithm.use_kl_in_reward=False",
                                            "trainer.critic_warmup=0",
                                            "trainer.project_name=verl_grpo_example_gsm8k",
                                            "trainer.experiment_name=qwen3_8b_function_rm",
                                            "trainer.n_gpus_per_node=1",
                                            "trainer.nnodes=1",
                                            "trainer.save_freq=20",
                                            "trainer.test_freq=5",
                                            "trainer.total_epochs=15"};

const std::vector<std::string> kVerlPpo = {"algorithm.adv_estimator=gae",
                                           "data.train_batch_size=16",
                                           "actor_rollout_ref.model.use_remove_padding=True",
                                           "actor_rollout_ref.actor.ppo_mini_batch_size=8",
                                           "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
                                           "actor_rollout_ref.actor.use_kl_loss=False",
                                           "actor_rollout_ref.model.enable_gradient_checkpointing=True",
                                           "actor_rollout_ref.rollout.gpu_memory_utilization=0.4",
                                           "critic.optim.lr=1e-5",
                                           "critic.model.use_remove_padding=True",
                                           "critic.model.enable_gradient_checkpointing=True",
                                           "critic.ppo_micro_batch_size_per_gpu=4",
                                           "critic.model.fsdp_config.param_offload=False",
                                           "critic.model.fsdp_config.optimizer_offload=True",
                                           "trainer.critic_warmup=0",
                                           "trainer.total_epochs=15"};

std::vector<std::string> config_command(std::vector<std::string> overrides) {
  overrides.insert(overrides.begin(), "config");
  return overrides;
}

}  // namespace

TEST_CASE("verl's GRPO example command line resolves: keys moved, knobs noted", "[config][verl]") {
  const auto result = run(config_command(kVerlGrpo));
  INFO(result.err);
  REQUIRE(result.status == 0);
  const rlcore::ConfigNode tree = rlcore::ConfigNode::parse(result.out, "rlcore config");
  CHECK(tree.at_path("actor_rollout_ref.actor.enable_gradient_checkpointing").as<bool>());
  CHECK_FALSE(tree.at_path("actor_rollout_ref.model.enable_gradient_checkpointing").defined());
  CHECK_FALSE(tree.at_path("actor_rollout_ref.rollout.gpu_memory_utilization").defined());
  CHECK_FALSE(tree.at_path("trainer.critic_warmup").defined());
  // Packing is rlcore's too (docs/trainer.md#packing): the key stays, without a note.
  CHECK(tree.at_path("actor_rollout_ref.model.use_remove_padding").as<bool>());
  CHECK_THAT(result.err, !Catch::Contains("use_remove_padding"));
  CHECK_THAT(result.err, Catch::Contains("'actor_rollout_ref.rollout.gpu_memory_utilization'"));
  CHECK_THAT(result.err, !Catch::Contains("critic_warmup"));  // at its accepted value: nothing to say
}

TEST_CASE("verl's PPO example command line resolves, the critic's model keys moved to its engine", "[config][verl]") {
  const auto result = run(config_command(kVerlPpo));
  INFO(result.err);
  REQUIRE(result.status == 0);
  const rlcore::ConfigNode tree = rlcore::ConfigNode::parse(result.out, "rlcore config");
  CHECK(tree.at_path("critic.enable_gradient_checkpointing").as<bool>());
  CHECK(tree.at_path("critic.fsdp_config.optimizer_offload").as<bool>());
  CHECK_FALSE(tree.at_path("critic.fsdp_config.param_offload").as<bool>());
  CHECK_FALSE(tree.at_path("critic.model.fsdp_config").defined());
  CHECK(tree.at_path("critic.model.use_remove_padding").as<bool>());
  CHECK_THAT(result.err, !Catch::Contains("use_remove_padding"));
}

TEST_CASE("verl features rlcore lacks are refused by key unless off; conflicts name both keys", "[config][verl]") {
  const auto error = [](std::vector<std::string> overrides) {
    const auto result = run(config_command(std::move(overrides)));
    CHECK(result.status == 1);
    return result.err;
  };
  // Ulysses is the fsdp engine's key now (docs/train-fsdp.md#sequence-parallelism), its bounds the engine's.
  CHECK_THAT(error({"actor_rollout_ref.actor.ulysses_sequence_parallel_size=0"}),
             Catch::Contains("ulysses_sequence_parallel_size"));
  CHECK_THAT(error({"trainer.critic_warmup=3"}), Catch::Contains("critic-only warm-up"));
  CHECK_THAT(error({"actor_rollout_ref.actor.megatron.context_parallel_size=2"}),
             Catch::Contains("context parallelism is not implemented") && Catch::Contains("only 1 is accepted"));
  // verl's agent loop keys are rlcore's too (docs/agent-loop.md): a bad value names its key.
  CHECK_THAT(error({"actor_rollout_ref.rollout.multi_turn.format=gpt-oss"}),
             Catch::Contains("actor_rollout_ref.rollout.multi_turn.format") && Catch::Contains("hermes"));
  CHECK_THAT(error({"actor_rollout_ref.actor.fsdp_config.fsdp_size=4"}), Catch::Contains("hybrid sharding"));
  CHECK_THAT(error({"actor_rollout_ref.hybrid_engine=false"}), Catch::Contains("only true is accepted"));
  CHECK_THAT(error({"actor_rollout_ref.model.enable_gradient_checkpointing=True",
                    "actor_rollout_ref.actor.enable_gradient_checkpointing=false"}),
             Catch::Contains("set the same thing differently"));
  CHECK_THAT(error({"actor_rollout_ref.rollout.name=vllm"}),
             Catch::Contains("no inference_engine named 'vllm'") && Catch::Contains("vllm_bridge"));
  // The same values spelled alike are one setting, and the accepted values pass silently.
  const auto same =
      run(config_command({"actor_rollout_ref.model.enable_gradient_checkpointing=True",
                          "actor_rollout_ref.actor.enable_gradient_checkpointing=true",
                          "actor_rollout_ref.actor.ulysses_sequence_parallel_size=1",
                          "actor_rollout_ref.hybrid_engine=True", "actor_rollout_ref.model.use_shm=False"}));
  CHECK(same.status == 0);
  CHECK(same.err.empty());
}

TEST_CASE("enforce_eager is the native engine's option and a note for other engines", "[config][verl]") {
  // True: the default is false, as in verl.
  const auto native = run(config_command({"actor_rollout_ref.rollout.enforce_eager=True"}));
  INFO(native.err);
  REQUIRE(native.status == 0);
  const rlcore::ConfigNode tree = rlcore::ConfigNode::parse(native.out, "rlcore config");
  CHECK(tree.at_path("actor_rollout_ref.rollout.enforce_eager").as<bool>());
  CHECK_THAT(native.err, !Catch::Contains("enforce_eager"));

  rlcore::ConfigNode bridge =
      rlcore::ConfigNode::parse("actor_rollout_ref: {rollout: {name: vllm_bridge, enforce_eager: false}}", "test");
  const std::vector<std::string> notes = rlcore::config::apply_verl_key_rules(bridge);
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Catch::Contains("'actor_rollout_ref.rollout.enforce_eager'") &&
                           Catch::Contains("rollout engine 'vllm_bridge'") && Catch::Contains("--enforce-eager"));
  CHECK_FALSE(bridge.at_path("actor_rollout_ref.rollout.enforce_eager").defined());
}

TEST_CASE("verl's Megatron spellings of routing replay and the router losses move to rlcore's keys", "[config][verl]") {
  rlcore::ConfigNode tree = rlcore::ConfigNode::parse(R"(
actor_rollout_ref:
  actor:
    strategy: megatron
    megatron:
      expert_model_parallel_size: 2
      router_replay: {mode: R3}
      override_transformer_config: {moe_aux_loss_coeff: 0.01, moe_z_loss_coeff: 0.001}
)",
                                                      "verl_megatron.yaml");
  rlcore::config::apply_verl_key_rules(tree);
  CHECK(tree.at_path("actor_rollout_ref.actor.router_replay.mode").as<std::string>() == "R3");
  CHECK(tree.at_path("actor_rollout_ref.actor.megatron.moe_aux_loss_coeff").as<double>() == 0.01);
  CHECK(tree.at_path("actor_rollout_ref.actor.megatron.moe_z_loss_coeff").as<double>() == 0.001);
  CHECK_FALSE(tree.at_path("actor_rollout_ref.actor.megatron.router_replay").defined());
  CHECK_FALSE(tree.at_path("actor_rollout_ref.actor.megatron.override_transformer_config").defined());
  CHECK(tree.at_path("actor_rollout_ref.actor.megatron.expert_model_parallel_size").as<int64_t>() == 2);
}

TEST_CASE("the user guide lists every verl key rule", "[config][verl]") {
  const std::string guide = read_file(rlcore_test::source_dir() + "/docs/user-guide.md");
  const auto begin = guide.find("### verl keys");
  REQUIRE(begin != std::string::npos);
  const std::string section = guide.substr(begin, guide.find("\n## ", begin) - begin);
  for (const rlcore::config::VerlKeyRule& rule : rlcore::config::verl_key_rules()) {
    const std::string key = rule.key;
    INFO(key);
    CHECK_THAT(section, Catch::Contains(key.substr(key.rfind('.') + 1)));
  }
}
