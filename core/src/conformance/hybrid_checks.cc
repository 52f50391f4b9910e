// Checks for the hybrid engine's kinds: a WeightAdaptor builds every rollout
// tensor bit-exactly from a train engine's full parameters, an Offloader's
// round trip changes nothing, and a ShardingManager's swap hands the rollout
// exactly the trainer's weights, restores the trainer bit-identically, and keeps
// its ledger's peak within the bound below. They run on the in-tree engines
// (train_engine fsdp, inference_engine native) and, for the manager, the
// `identity` adaptor and `engine` offloader.
#include <ATen/ATen.h>

#include <map>

#include "conformance/conformance.h"
#include "conformance/tiny_model.h"
#include "rlcore/error.h"
#include "rlcore/offloader.h"
#include "rlcore/sharding_manager.h"
#include "rlcore/weight_adaptor.h"

namespace rlcore::conformance {
namespace {

namespace fs = std::filesystem;

template <class Interface>
std::shared_ptr<Interface> make_component(CheckEnv& env) {
  ComponentContext context;
  context.model_path = env.tiny_model.string();  // e.g. the megatron adaptor reads the model's config
  auto made = std::static_pointer_cast<Interface>(env.candidate.factory(env.candidate_options, context));
  if (!made) throw ValueError("the factory of " + env.candidate.kind + " '" + env.candidate.name + "' returned null");
  return made;
}

// The in-tree component (kind, name) the check runs the candidate with; null when not loaded.
const ComponentEntry* helper(const CheckEnv& env, const std::string& kind, const std::string& name) {
  return env.registry.find(kind, name);
}

Outcome helper_missing(const std::string& kind, const std::string& name) {
  return Outcome::skipped(kind + " '" + name + "' is not loaded (rlcore's own plugins provide it)");
}

std::map<std::string, at::Tensor> full_parameter_map(TrainEngine& engine) {
  std::map<std::string, at::Tensor> out;
  engine.for_each_full_parameter(
      [&](const std::string& name, const at::Tensor& tensor) { out.emplace(name, tensor.detach().clone()); });
  return out;
}

// Every rollout tensor (native's weight_meta, HF names) built from the full
// parameters of the first train engine whose names the adaptor's sources() use.
Outcome adaptor_round_trip(CheckEnv& env) {
  auto adaptor = make_component<WeightAdaptor>(env);
  const ComponentEntry* native = helper(env, InferenceEngine::kKind, "native");
  if (!native) return helper_missing(InferenceEngine::kKind, "native");
  const std::vector<WeightMeta> targets = make_inference_engine(*native, ConfigNode(), env.tiny_model)->weight_meta();
  const RolloutLayout layout;
  std::string tried;
  for (const ComponentEntry* trainer : env.registry.entries(TrainEngine::kKind)) {
    if (trainer->origin.plugin != "train-fsdp" && trainer->origin.plugin != "train-megatron") continue;
    const auto params = full_parameter_map(*make_train_engine(*trainer, ConfigNode(), env.tiny_model));
    bool covered = true;
    for (const WeightMeta& target : targets) {
      for (const auto& source : adaptor->sources(target, layout)) covered = covered && params.count(source);
    }
    tried += (tried.empty() ? "" : ", ") + trainer->name;
    if (!covered) continue;
    const auto expected = tiny_model_weights(1);
    const std::map<std::string, at::Tensor> hf(expected.begin(), expected.end());
    for (const WeightMeta& target : targets) {
      std::vector<at::Tensor> full;
      for (const auto& source : adaptor->sources(target, layout)) full.push_back(params.at(source));
      at::Tensor out = at::empty(target.shape, at::TensorOptions().dtype(target.dtype));
      adaptor->convert(target, layout, full, out);
      if (!bit_equal(out, hf.at(target.name).to(target.dtype))) {
        return Outcome::fail("'" + target.name + "' built from " + trainer->name + "'s parameters differs from the " +
                             "checkpoint's (max |diff| " + std::to_string(max_abs_diff(out, hf.at(target.name))) + ")");
      }
    }
    return Outcome::pass("bit-exact from train_engine " + trainer->name);
  }
  return Outcome::not_applicable("no in-tree train engine (" + (tried.empty() ? std::string("none loaded") : tried) +
                                 ") has the parameters this adaptor's sources() name");
}

// Two fsdp engines step; the candidate offloads and reloads one: its shards
// are unchanged and a second step on both gives identical parameters.
Outcome offloader_round_trip(CheckEnv& env) {
  auto offloader = make_component<Offloader>(env);
  const ComponentEntry* fsdp = helper(env, TrainEngine::kKind, "fsdp");
  if (!fsdp) return helper_missing(TrainEngine::kKind, "fsdp");
  auto moved = make_train_engine(*fsdp, ConfigNode(), env.tiny_model);
  auto stayed = make_train_engine(*fsdp, ConfigNode(), env.tiny_model);
  for (auto* engine : {moved.get(), stayed.get()})
    engine->train_step(train_batch(4), forward_options(1.0, false), pg_loss);
  std::vector<at::Tensor> before;
  for (const auto& shard : moved->parameter_shards()) before.push_back(shard.local.detach().clone());
  offloader->offload(*moved, OffloadSet::kAll);
  offloader->reload(*moved, OffloadSet::kAll);
  const auto after = moved->parameter_shards();
  for (size_t i = 0; i < after.size(); ++i) {
    if (!bit_equal(after[i].local, before.at(i)))
      return Outcome::fail("'" + after[i].name + "' changed across offload/reload");
  }
  for (auto* engine : {moved.get(), stayed.get()})
    engine->train_step(train_batch(6), forward_options(1.0, false), pg_loss);
  const auto a = full_parameter_map(*moved);
  for (const auto& [name, tensor] : full_parameter_map(*stayed)) {
    if (!bit_equal(a.at(name), tensor)) return Outcome::fail("after offload/reload and a step, '" + name + "' differs");
  }
  return Outcome::pass("bit-exact");
}

// fsdp (seed-1 weights) and native (made from other weights, so every weight
// it generates with must come through the swap), identity adaptor, engine offloader.
struct Hybrid {
  std::shared_ptr<ShardingManager> manager;
  HybridEngines engines;
};

std::optional<Hybrid> make_hybrid(CheckEnv& env, Outcome& missing) {
  const std::pair<const char*, const char*> needed[] = {{TrainEngine::kKind, "fsdp"},
                                                        {InferenceEngine::kKind, "native"},
                                                        {WeightAdaptor::kKind, "identity"},
                                                        {Offloader::kKind, "engine"}};
  for (const auto& [kind, name] : needed) {
    if (!helper(env, kind, name)) {
      missing = helper_missing(kind, name);
      return std::nullopt;
    }
  }
  Hybrid hybrid;
  hybrid.manager = make_component<ShardingManager>(env);
  hybrid.engines.train = make_train_engine(*helper(env, TrainEngine::kKind, "fsdp"), ConfigNode(), env.tiny_model);
  hybrid.engines.rollout =
      make_inference_engine(*helper(env, InferenceEngine::kKind, "native"), ConfigNode(), env.tiny_model_alt);
  hybrid.engines.adaptor = std::static_pointer_cast<WeightAdaptor>(
      helper(env, WeightAdaptor::kKind, "identity")->factory(ConfigNode(), ComponentContext()));
  hybrid.engines.offloader = std::static_pointer_cast<Offloader>(
      helper(env, Offloader::kKind, "engine")->factory(ConfigNode(), ComponentContext()));
  return hybrid;
}

Outcome manager_round_trip(CheckEnv& env) {
  Outcome missing;
  auto hybrid = make_hybrid(env, missing);
  if (!hybrid) return missing;
  auto& [manager, engines] = *hybrid;
  engines.train->train_step(train_batch(4), forward_options(1.0, false), pg_loss);
  const auto train_before = full_parameter_map(*engines.train);
  manager->attach(engines);
  // What the rollout must generate: an engine made from the trainer's exported weights.
  engines.train->export_hf((env.workdir / "trained").string());
  const GenerationOutput want =
      make_inference_engine(*helper(env, InferenceEngine::kKind, "native"), ConfigNode(), env.workdir / "trained")
          ->generate(test_prompts(), greedy());
  for (int64_t version : {3, 4}) {
    manager->to_rollout(version);
    if (!manager->in_rollout()) return Outcome::fail("in_rollout() is false after to_rollout()");
    const GenerationOutput got = engines.rollout->generate(test_prompts(), greedy());
    if (got.weight_version != version) {
      return Outcome::fail("the rollout reports weight_version " + std::to_string(got.weight_version) +
                           " after to_rollout(" + std::to_string(version) + ")");
    }
    if (got.token_ids != want.token_ids || got.logprobs != want.logprobs) {
      return Outcome::fail("swap " + std::to_string(version - 2) +
                           ": the rollout's greedy output differs from an engine made from the trainer's weights");
    }
    manager->to_train();
    if (manager->in_rollout()) return Outcome::fail("in_rollout() is true after to_train()");
    for (const auto& [name, tensor] : full_parameter_map(*engines.train)) {
      if (!bit_equal(tensor, train_before.at(name))) {
        return Outcome::fail("after to_train(), the trainer's '" + name + "' is not bit-identical to before the swap");
      }
    }
  }
  return Outcome::pass("bit-exact, two swaps");
}

// For a manager that claims BoundedSwapMemory: the ledger's peak during a swap <=
// train state + the rollout's weights + one bucket, a bucket holding at most the
// rollout's weights (so: train + 2 x rollout).
Outcome manager_ledger_bound(CheckEnv& env) {
  Outcome missing;
  auto hybrid = make_hybrid(env, missing);
  if (!hybrid) return missing;
  auto& [manager, engines] = *hybrid;
  if (!supports<BoundedSwapMemory>(*manager)) {
    return Outcome::not_applicable("does not claim the bounded_swap_memory capability");
  }
  engines.train->train_step(train_batch(4), forward_options(1.0, false), pg_loss);
  const TrainMemory memory = engines.train->memory();
  const int64_t train_state = memory.param_bytes + memory.grad_bytes + memory.optimizer_bytes;
  int64_t rollout = 0;
  for (const WeightMeta& meta : engines.rollout->weight_meta()) {
    int64_t numel = 1;
    for (int64_t d : meta.shape) numel *= d;
    rollout += numel * static_cast<int64_t>(c10::elementSize(meta.dtype));
  }
  manager->attach(engines);
  const SwapStats stats = manager->to_rollout(1);
  manager->to_train();
  const int64_t peak = std::max(stats.planned_peak_bytes, manager->ledger().peak());
  if (peak <= 0) return Outcome::fail("the ledger recorded no memory during the swap");
  Outcome outcome = Outcome::measured(static_cast<double>(peak), static_cast<double>(train_state + 2 * rollout),
                                      "ledger peak bytes vs train state + 2 x rollout weights");
  return outcome;
}

}  // namespace

std::vector<Check> weight_adaptor_checks() {
  return {{"create",
           [](CheckEnv& env) {
             make_component<WeightAdaptor>(env);
             return Outcome::pass();
           }},
          {"round_trip", adaptor_round_trip}};
}

std::vector<Check> offloader_checks() {
  return {{"create",
           [](CheckEnv& env) {
             make_component<Offloader>(env);
             return Outcome::pass();
           }},
          {"round_trip", offloader_round_trip}};
}

std::vector<Check> sharding_manager_checks() {
  return {{"create",
           [](CheckEnv& env) {
             make_component<ShardingManager>(env);
             return Outcome::pass();
           }},
          {"round_trip", manager_round_trip},
          {"ledger_bound", manager_ledger_bound}};
}

}  // namespace rlcore::conformance
