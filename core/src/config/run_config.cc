// Core config schema and whole-config validation.
#include "rlcore/core/config/run_config.h"

#include <algorithm>

#include "config/verl_keys.h"
#include "rlcore/core/config/engine_options.h"
#include "rlcore/capabilities.h"
#include "rlcore/device.h"
#include "rlcore/error.h"
#include "rlcore/string_join.h"

namespace rlcore::config {

const OptionsSchema<RunConfig>& run_config_schema() {
  static const OptionsSchema<RunConfig> schema = [] {
    OptionsSchema<RunConfig> root;
    root.section("trainer", &RunConfig::trainer, trainer_schema())
        .section("data", &RunConfig::data, data_config_schema())
        .section("actor_rollout_ref", &RunConfig::actor_rollout_ref, actor_rollout_ref_schema())
        .section("critic", &RunConfig::critic, critic_schema())
        .section("algorithm", &RunConfig::algorithm, algorithm_schema())
        .section("reward", &RunConfig::reward, reward_schema())
        .section("runtime", &RunConfig::runtime, runtime_config_schema())
        .section("async_training", &RunConfig::async_training, async_training_schema())
        .section("rollout", &RunConfig::rollout, rollout_pool_schema());
    return root;
  }();
  return schema;
}

std::string RunConfig::run_dir() const {
  if (!trainer.default_local_dir.empty()) return trainer.default_local_dir;
  return "runs/" + trainer.project_name + "/" + trainer.experiment_name;
}

std::string component_options_path(const std::string& kind, const std::string& name) {
  if (kind == "reward" && name == kCustomFunctionGrader) return "reward.custom_reward_function";
  if (kind == "reward") return "reward.graders." + name;
  if (kind == "advantage_estimator") return "algorithm";
  if (kind == "policy_loss") return "actor_rollout_ref.actor.policy_loss";
  // The same keys are read from actor_rollout_ref.ref and critic for the engines of those roles.
  if (kind == "train_engine") return "actor_rollout_ref.actor";
  if (kind == "inference_engine") return "actor_rollout_ref.rollout";
  // The sharding manager (rollout.sharding_manager) reads the other keys of hybrid_engine.
  if (kind == "sharding_manager") return "actor_rollout_ref.hybrid_engine";
  // Tools read theirs from the tool config file (multi_turn.tool_config_path): tools: [{name, config}].
  if (kind == "tool") return "tools[" + name + "].config";
  return "plugins." + kind + "." + name;
}

ConfigNode estimator_options(const Registry& registry, const std::string& estimator, const ConfigNode& options) {
  const ComponentEntry* selected = registry.find("advantage_estimator", estimator);
  if (selected == nullptr || !options.is_map()) return options;
  const auto declares = [](const ComponentEntry& entry, const std::string& key) {
    return std::any_of(entry.keys.begin(), entry.keys.end(), [&](const KeySpec& spec) { return spec.name == key; });
  };
  ConfigNode own = options.clone();
  for (const std::string& key : options.keys()) {
    if (declares(*selected, key)) continue;
    for (const std::string& other : registry.names("advantage_estimator")) {
      if (declares(*registry.find("advantage_estimator", other), key)) {
        own.erase(key);
        break;
      }
    }
  }
  return own;
}

namespace {

void fill_defaults(ConfigNode& tree, const std::vector<KeySpec>& keys) {
  for (const auto& key : keys) {
    if (key.type == "map") continue;
    if (!tree.at_path(key.name).defined()) {
      tree.set(key.name, key.default_value == "\"\"" ? "''" : key.default_value, "default");
    }
  }
}

void validate_graders(const Registry& registry, const RunConfig& config) {
  if (config.reward.grader != "auto") registry.get("reward", config.reward.grader);
  const ConfigNode& graders = config.reward.graders;
  for (const auto& name : graders.keys()) {
    const ConfigNode options = graders[name];
    if (!registry.find("reward", name)) {
      throw ConfigError("key " + options.describe() + ": no grader named '" + name +
                        "' is registered; registered graders: " + join(registry.names("reward")));
    }
    registry.get("reward", name).factory(options, ComponentContext());  // validates the options
  }
  if (custom_reward_function_enabled(config.reward)) {
    // Validates the keys and that the file exists; the program starts at the first batch.
    registry.get("reward", kCustomFunctionGrader).factory(config.reward.custom_reward_function, ComponentContext());
  }
}

const ComponentEntry& component(const Registry& registry, const std::string& kind, const std::string& name,
                                const std::string& key) {
  if (const ComponentEntry* entry = registry.find(kind, name)) return *entry;
  const std::string known = join(registry.names(kind));
  const bool in_process_server = kind == "inference_engine" && (name == "vllm" || name == "sglang");
  throw ConfigError("key " + key + ": no " + kind + " named '" + name +
                    "' is registered (known: " + (known.empty() ? "none; is its plugin on --plugins?" : known) + ")" +
                    (in_process_server ? "; rlcore drives a vLLM or SGLang server you start with vllm_bridge "
                                         "(docs/vllm-bridge.md), or generates in its workers with native"
                                       : ""));
}

// Routing replay (docs/moe.md): the engines must have the capabilities, R3
// needs the rollout's routing, and only the synchronous single-turn rollout records it.
template <class Lacks>
void validate_routing_replay(const Registry& registry, const RunConfig& config, const Lacks& actor_lacks) {
  const auto& arr = config.actor_rollout_ref;
  const std::string& mode = arr.actor.router_replay.mode;
  if (arr.actor.router_replay.replays() && actor_lacks(ReplaysRouting::kName)) {
    throw ConfigError("key actor_rollout_ref.actor.router_replay.mode = " + mode + ": the train engine '" +
                      arr.actor.strategy + "' cannot replay a routing (it lacks the '" + ReplaysRouting::kName +
                      "' capability; see `rlcore plugins`); use actor_rollout_ref.actor.strategy=fsdp");
  }
  if (mode == "R3" && !arr.rollout.enable_rollout_routing_replay) {
    throw ConfigError(
        "key actor_rollout_ref.actor.router_replay.mode = R3 replays the rollout's routing: set "
        "actor_rollout_ref.rollout.enable_rollout_routing_replay=true");
  }
  if (!arr.rollout.enable_rollout_routing_replay) return;
  const auto rollout = registry.capabilities("inference_engine", arr.rollout.name);
  if (std::find(rollout.begin(), rollout.end(), RecordsRouting::kName) == rollout.end()) {
    throw ConfigError("key actor_rollout_ref.rollout.enable_rollout_routing_replay: the inference engine '" +
                      arr.rollout.name + "' cannot record a routing (it lacks the '" + RecordsRouting::kName +
                      "' capability); use actor_rollout_ref.rollout.name=native");
  }
  if (config.async_training.mode != "sync" || arr.rollout.multi_turn.enable) {
    throw ConfigError(
        "key actor_rollout_ref.rollout.enable_rollout_routing_replay: the routing is recorded by synchronous "
        "single-turn rollouts only (async_training.mode = " +
        config.async_training.mode +
        ", rollout.multi_turn.enable = " + (arr.rollout.multi_turn.enable ? "true" : "false") + ")");
  }
}

// The engines, estimator and loss a config selects, each given its keys.
void validate_trainer_components(const Registry& registry, const ConfigNode& tree, const RunConfig& config) {
  if (tree.has("actor_rollout_ref")) {
    const auto& arr = config.actor_rollout_ref;
    const auto capabilities = registry.capabilities("train_engine", arr.actor.strategy);
    auto lacks = [&capabilities](const char* name) {
      return std::find(capabilities.begin(), capabilities.end(), name) == capabilities.end();
    };
    if (arr.model.lora() && lacks(TrainsLowRankAdapters::kName)) {
      const std::string key = arr.model.lora_rank > 0 ? "lora_rank" : "lora_adapter_path";
      throw ConfigError("key actor_rollout_ref.model." + key + ": the train engine '" + arr.actor.strategy +
                        "' does not train LoRA adapters (it lacks the '" + TrainsLowRankAdapters::kName +
                        "' capability; see `rlcore plugins`); use actor_rollout_ref.actor.strategy=fsdp");
    }
    component(registry, "train_engine", arr.actor.strategy, "actor_rollout_ref.actor.strategy")
        .validate(actor_engine_options(arr));
    component(registry, "train_engine", arr.ref.strategy, "actor_rollout_ref.ref.strategy")
        .validate(ref_engine_options(arr));
    component(registry, "inference_engine", arr.rollout.name, "actor_rollout_ref.rollout.name")
        .validate(arr.rollout.engine_options);
    component(registry, "sharding_manager", arr.rollout.sharding_manager, "actor_rollout_ref.rollout.sharding_manager")
        .validate(arr.hybrid_engine.options);
    component(registry, "weight_adaptor", weight_adaptor_for(arr, registry),
              "actor_rollout_ref.hybrid_engine.weight_adaptor")
        .validate(ConfigNode());
    component(registry, "offloader", arr.hybrid_engine.offloader, "actor_rollout_ref.hybrid_engine.offloader")
        .validate(ConfigNode());
    component(registry, "policy_loss", arr.actor.policy_loss.loss_mode, "actor_rollout_ref.actor.policy_loss.loss_mode")
        .validate(arr.actor.policy_loss.options);
    if (arr.actor.calculate_sum_pi_squared && lacks(ComputesSumPiSquared::kName)) {
      throw ConfigError("key actor_rollout_ref.actor.calculate_sum_pi_squared: the train engine '" +
                        arr.actor.strategy + "' cannot compute sum_pi_squared (it lacks the '" +
                        ComputesSumPiSquared::kName + "' capability; see `rlcore plugins`)");
    }
    validate_routing_replay(registry, config, lacks);
    // A vLLM / SGLang server stops at the model's EOS unless the request sets ignore_eos, which the bridge's
    // requests cannot carry (the SDK's SamplingParams has only stop_token_ids): refused rather than ignored.
    if (arr.rollout.ignore_eos && arr.rollout.name == "vllm_bridge") {
      throw ConfigError(
          "key actor_rollout_ref.rollout.ignore_eos: the inference engine 'vllm_bridge' cannot pass it to its "
          "server (the server stops at the model's EOS whatever the bridge asks); use "
          "actor_rollout_ref.rollout.name=native");
    }
  }
  if (tree.has("critic")) {
    component(registry, "train_engine", config.critic.strategy, "critic.strategy")
        .validate(critic_engine_options(config.critic));
  }
  if (tree.has("algorithm")) {
    component(registry, "advantage_estimator", config.algorithm.adv_estimator, "algorithm.adv_estimator")
        .validate(estimator_options(registry, config.algorithm.adv_estimator, config.algorithm.estimator_options));
    const std::string& estimator = config.algorithm.adv_estimator;
    if ((estimator == "optimal_token_baseline" || estimator == "tir_optimal_token_baseline") &&
        !config.actor_rollout_ref.actor.calculate_sum_pi_squared) {
      throw ConfigError(
          "key algorithm.adv_estimator = " + estimator +
          " needs sum_pi_squared from the actor: set actor_rollout_ref.actor.calculate_sum_pi_squared=true");
    }
  }
}

// Where a key's value came from: 2 an override on the command line, 1 the
// config file, 0 neither (the schema default).
int where_set(const ConfigNode& tree, const std::vector<std::string>& overrides, const std::string& key) {
  for (const auto& text : overrides) {
    if (text.compare(0, text.find('='), key) == 0) return 2;
  }
  return tree.at_path(key).defined() ? 1 : 0;
}

// One size of the default pool under its two names (verl's trainer.<name>,
// rlcore's runtime.<name>): the one set closer to the command line wins, so an
// override of either name beats the file's; both set at the same level and
// different is an error. Both keys of the tree then show the size used.
void reconcile_pool_size(ConfigNode& tree, const std::vector<std::string>& overrides, const std::string& trainer_key,
                         int64_t& trainer_value, const std::string& runtime_key, int64_t& runtime_value) {
  const int trainer_level = where_set(tree, overrides, trainer_key);
  const int runtime_level = where_set(tree, overrides, runtime_key);
  if (trainer_level > 0 && trainer_level == runtime_level && trainer_value != runtime_value) {
    throw ConfigError("keys " + tree.at_path(trainer_key).describe() + " = " + std::to_string(trainer_value) + " and " +
                      tree.at_path(runtime_key).describe() + " = " + std::to_string(runtime_value) +
                      " both size the default pool and differ; set one of them (" + trainer_key + " is verl's name)");
  }
  const bool from_trainer = trainer_level >= runtime_level;
  if (from_trainer) {
    runtime_value = trainer_value;
  } else {
    trainer_value = runtime_value;
  }
  const std::string source = std::max(trainer_level, runtime_level) == 0 ? "default"
                             : from_trainer                              ? trainer_key
                                                                         : runtime_key;
  tree.set(trainer_key, std::to_string(trainer_value), source);
  tree.set(runtime_key, std::to_string(runtime_value), source);
}

// What can be told without a worker, before anything is written: a CPU build
// has no CUDA to give, and a local run asking for cuda needs a visible GPU.
void validate_device(const RunConfig& config) {
  if (!cuda_build()) resolve_device(config.trainer.device, 0, "trainer.device");
  // Workers the local launcher starts on this host need a GPU at least (the
  // count per pool is checked where the pools are known, trainer/workers.cc).
  if (config.runtime.launcher == "local") {
    check_device_slots(config.trainer.device, 1, "trainer.device", "trainer.n_gpus_per_node");
  }
}

// DAPO's overlong buffer must fit inside the response length it shapes.
void validate_reward_model(const Registry& registry, const RunConfig& config) {
  const RewardModelConfig& model = config.reward.reward_model;
  if (!model.enable) return;
  if (model.model_path.empty()) {
    throw ConfigError(
        "key reward.reward_model.model_path is required when reward.reward_model.enable is true: "
        "the sequence-classification checkpoint that scores responses");
  }
  component(registry, "train_engine", model.strategy, "reward.reward_model.strategy");
}

void validate_overlong_buffer(const ConfigNode& tree, const RunConfig& config) {
  const OverlongBufferConfig& buffer = config.reward.overlong_buffer;
  if (!buffer.enable) return;
  const std::string key = "reward.overlong_buffer.len";
  const std::string where = tree.at_path(key).defined() ? tree.at_path(key).describe() : key + " (default)";
  if (buffer.len <= 0) {
    throw ConfigError("key " + where + " must be > 0 when reward.overlong_buffer.enable is true (it is " +
                      std::to_string(buffer.len) + ")");
  }
  if (buffer.len > config.data.max_response_length) {
    throw ConfigError("key " + where + " = " + std::to_string(buffer.len) +
                      " is longer than data.max_response_length = " + std::to_string(config.data.max_response_length) +
                      ", the responses it shapes");
  }
}

}  // namespace

void validate(const RunConfig& config) {
  validate(config.algorithm);
  validate(config.async_training);
  if (config.trainer.check_exact_logprobs && !config.actor_rollout_ref.rollout.exact_logprobs) {
    throw ConfigError(
        "trainer.check_exact_logprobs needs actor_rollout_ref.rollout.exact_logprobs: true (without the exact "
        "forward the rollout's and the trainer's log-probs differ by rounding)");
  }
  // What the asynchronous modes cannot run: generation that the step itself
  // drives (DAPO's extra batches) would meet the pool's background generation;
  // fully_async streams single-turn requests.
  const std::string& mode = config.async_training.mode;
  if (mode == "sync") return;
  const std::string prefix = "async_training.mode: " + mode + " does not run ";
  if (config.algorithm.filter_groups.enable) {
    throw ConfigError(prefix +
                      "algorithm.filter_groups (DAPO's dynamic sampling generates more batches within a "
                      "step); use async_training.mode: sync");
  }
  if (mode == "fully_async" && config.actor_rollout_ref.rollout.multi_turn.enable) {
    throw ConfigError(prefix + "actor_rollout_ref.rollout.multi_turn (the agent loop); use one_step_off or sync");
  }
}

ResolvedConfig resolve_config(const Registry& registry, const std::string& config_file,
                              const std::vector<std::string>& overrides) {
  ResolvedConfig resolved;
  resolved.tree = config_file.empty() ? ConfigNode::parse("", "<defaults>") : ConfigNode::load_file(config_file);
  apply_overrides(resolved.tree, overrides);
  resolved.notes = apply_verl_key_rules(resolved.tree);
  resolved.config = run_config_schema().parse(resolved.tree);
  RunConfig& config = resolved.config;
  reconcile_pool_size(resolved.tree, overrides, "trainer.nnodes", config.trainer.nnodes, "runtime.nnodes",
                      config.runtime.nnodes);
  reconcile_pool_size(resolved.tree, overrides, "trainer.n_gpus_per_node", config.trainer.n_gpus_per_node,
                      "runtime.n_workers_per_node", config.runtime.n_workers_per_node);
  validate_device(config);
  validate_graders(registry, resolved.config);
  validate_overlong_buffer(resolved.tree, resolved.config);
  validate_reward_model(registry, resolved.config);
  validate(resolved.config);
  validate_trainer_components(registry, resolved.tree, resolved.config);
  fill_defaults(resolved.tree, run_config_schema().keys());
  return resolved;
}

}  // namespace rlcore::config
