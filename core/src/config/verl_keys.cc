// The table of verl keys without an rlcore key of their own (verl_keys.h).
#include "config/verl_keys.h"

#include <string>

#include "rlcore/error.h"

namespace rlcore::config {
namespace {

constexpr const char* kNoContextParallel =
    "Megatron's context parallelism is not implemented (docs/train-megatron.md#context-parallelism); "
    "the fsdp engine splits long sequences with ulysses_sequence_parallel_size";
constexpr const char* kEngineKnob =
    "an in-process vLLM / SGLang setting; rlcore's native engine sizes its KV cache from max_num_seqs and "
    "max_model_len, and a vllm_bridge server takes its own settings on its command line";

std::string parent_of(const std::string& key) { return key.substr(0, key.rfind('.')); }
std::string leaf_of(const std::string& key) { return key.substr(key.rfind('.') + 1); }

// Whether the scalar `node` spells `value` (a YAML int or bool, as verl's Hydra overrides write them).
bool holds(const ConfigNode& node, const std::string& value) {
  if (!node.is_scalar()) return false;
  try {
    if (value == "true" || value == "false") return node.as<bool>() == (value == "true");
    return node.as<int64_t>() == std::stoll(value);
  } catch (const ConfigError&) {
    return false;
  }
}

// Whether two scalars say the same (True and true, 1 and 1.0).
bool same_scalar(const ConfigNode& a, const ConfigNode& b) {
  try {
    return a.as<bool>() == b.as<bool>();
  } catch (const ConfigError&) {
  }
  try {
    return a.as<double>() == b.as<double>();
  } catch (const ConfigError&) {
  }
  return a.as<std::string>() == b.as<std::string>();
}

// Off: false, 0 or null, about which "no effect" says nothing worth a line.
bool is_off(const ConfigNode& node) {
  if (node.is_null()) return true;
  if (!node.is_scalar()) return false;
  try {
    return !node.as<bool>();
  } catch (const ConfigError&) {
    return false;
  }
}

void move_key(ConfigNode& tree, const VerlKeyRule& rule, const ConfigNode& node) {
  const ConfigNode existing = tree.at_path(rule.target);
  const std::string source = node.describe() + ", verl's name for " + rule.target;
  if (!existing.defined()) {
    tree.set(rule.target, node.to_yaml(), source);
  } else if (existing.is_map() && node.is_map()) {
    ConfigNode target = existing;
    target.merge(node);
  } else if (!(existing.is_scalar() && node.is_scalar() && same_scalar(existing, node))) {
    throw ConfigError("keys " + node.describe() + " (verl's name) and " + existing.describe() +
                      " set the same thing differently; keep one");
  }
}

}  // namespace

const std::vector<VerlKeyRule>& verl_key_rules() {
  using H = VerlKeyHandling;
  static const std::vector<VerlKeyRule> rules = {
      {"actor_rollout_ref.model.enable_gradient_checkpointing", H::kMoved,
       "actor_rollout_ref.actor.enable_gradient_checkpointing", ""},
      {"critic.model.enable_gradient_checkpointing", H::kMoved, "critic.enable_gradient_checkpointing", ""},
      {"critic.model.fsdp_config", H::kMoved, "critic.fsdp_config", ""},
      // verl's per-engine spellings of routing replay and the router's losses (docs/moe.md).
      {"actor_rollout_ref.actor.megatron.router_replay", H::kMoved, "actor_rollout_ref.actor.router_replay", ""},
      {"actor_rollout_ref.actor.megatron.override_transformer_config.moe_aux_loss_coeff", H::kMoved,
       "actor_rollout_ref.actor.megatron.moe_aux_loss_coeff", ""},
      {"actor_rollout_ref.actor.megatron.override_transformer_config.moe_z_loss_coeff", H::kMoved,
       "actor_rollout_ref.actor.megatron.moe_z_loss_coeff", ""},
      {"actor_rollout_ref.model.use_shm", H::kNoEffect, nullptr,
       "verl copies the checkpoint to /dev/shm first; rlcore memory-maps the safetensors files"},
      {"actor_rollout_ref.model.trust_remote_code", H::kNoEffect, nullptr,
       "rlcore runs its own code for the architectures it supports, never a checkpoint's Python"},
      {"actor_rollout_ref.model.use_fused_kernels", H::kNoEffect, nullptr, "a choice among verl's Triton kernels"},
      {"actor_rollout_ref.model.use_liger", H::kNoEffect, nullptr, "a choice among verl's Liger kernels"},
      {"actor_rollout_ref.rollout.gpu_memory_utilization", H::kNoEffect, nullptr, kEngineKnob},
      {"actor_rollout_ref.rollout.enforce_eager", H::kNativeRolloutOption, nullptr,
       "a vllm_bridge server takes --enforce-eager on its own command line"},
      {"actor_rollout_ref.rollout.enable_chunked_prefill", H::kNoEffect, nullptr, kEngineKnob},
      {"actor_rollout_ref.rollout.max_num_batched_tokens", H::kNoEffect, nullptr, kEngineKnob},
      {"actor_rollout_ref.rollout.enable_prefix_caching", H::kNativeRolloutOption, nullptr,
       "a vllm_bridge server takes --enable-prefix-caching on its own command line"},
      {"actor_rollout_ref.rollout.disable_log_stats", H::kNoEffect, nullptr, kEngineKnob},
      {"actor_rollout_ref.rollout.load_format", H::kNoEffect, nullptr,
       "how vLLM loads its first weights; rlcore's rollout gets the actor's weights from the hybrid engine"},
      {"actor_rollout_ref.rollout.layered_summon", H::kNoEffect, nullptr,
       "verl's layer-by-layer LoRA gather; rlcore's swap gathers one layer at a time already"},
      {"actor_rollout_ref.rollout.mode", H::kNoEffect, nullptr,
       "verl's sync / async rollout servers; rlcore's rollout generates each step's batch in its workers"},
      {"actor_rollout_ref.actor.checkpoint", H::kNoEffect, nullptr,
       "what verl's checkpoints hold; rlcore's always hold the model, the optimizer and the trainer state"},
      {"data.return_raw_chat", H::kNoEffect, nullptr,
       "verl hands chat messages to agent loops and reward models; rlcore keeps them itself"},
      {"actor_rollout_ref.actor.megatron.context_parallel_size", H::kOnlyValue, "1", kNoContextParallel},
      {"actor_rollout_ref.ref.megatron.context_parallel_size", H::kOnlyValue, "1", kNoContextParallel},
      {"critic.megatron.context_parallel_size", H::kOnlyValue, "1", kNoContextParallel},
      {"actor_rollout_ref.actor.fsdp_config.fsdp_size", H::kOnlyValue, "-1",
       "hybrid sharding is not implemented: fsdp shards over the whole data-parallel group"},
      {"actor_rollout_ref.ref.fsdp_config.fsdp_size", H::kOnlyValue, "-1",
       "hybrid sharding is not implemented: fsdp shards over the whole data-parallel group"},
      {"trainer.critic_warmup", H::kOnlyValue, "0", "critic-only warm-up steps are not implemented"},
      {"actor_rollout_ref.hybrid_engine", H::kOnlyValue, "true",
       "rlcore's rollout workers apart from the actor's are set with async_training.mode: one_step_off "
       "(docs/async.md)"},
  };
  return rules;
}

std::vector<std::string> apply_verl_key_rules(ConfigNode& tree) {
  std::vector<std::string> notes;
  for (const VerlKeyRule& rule : verl_key_rules()) {
    const ConfigNode node = tree.at_path(rule.key);
    if (!node.defined()) continue;
    // verl's hybrid_engine is a flag where rlcore has a section of the same name.
    if (rule.handling == VerlKeyHandling::kOnlyValue && node.is_map()) continue;
    switch (rule.handling) {
      case VerlKeyHandling::kMoved:
        move_key(tree, rule, node);
        break;
      case VerlKeyHandling::kNoEffect:
        if (!is_off(node)) notes.push_back("key " + node.describe() + " has no effect in rlcore: " + rule.why);
        break;
      case VerlKeyHandling::kNativeRolloutOption: {
        const ConfigNode engine = tree.at_path("actor_rollout_ref.rollout.name");
        if (!engine.defined() || (engine.is_scalar() && engine.as<std::string>() == "native")) continue;
        notes.push_back("key " + node.describe() + " has no effect with rollout engine '" + engine.as<std::string>() +
                        "': " + rule.why);
        break;
      }
      case VerlKeyHandling::kOnlyValue:
        if (!holds(node, rule.target)) {
          throw ConfigError("key " + node.describe() + " = " + node.to_yaml() + ": " + rule.why + "; only " +
                            rule.target + " is accepted (verl's key, kept so verl configs run)");
        }
        break;
    }
    const std::string parent_path = parent_of(rule.key);
    ConfigNode parent = tree.at_path(parent_path);
    parent.erase(leaf_of(rule.key));
    // A section verl nests the key in (megatron.override_transformer_config) goes when emptied.
    if (parent.is_map() && parent.keys().empty() && parent_path.find('.') != std::string::npos) {
      tree.at_path(parent_of(parent_path)).erase(leaf_of(parent_path));
    }
  }
  return notes;
}

}  // namespace rlcore::config
