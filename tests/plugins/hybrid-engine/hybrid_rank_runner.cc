// One rank of a hybrid-engine test: an actor and a native rollout (--tp ranks
// per model copy) colocated in this process, switched by a sharding manager.
// The actor is fsdp (dp = world) or, with --trainer megatron, train-megatron
// loaded from its plugin (--train-tp x --train-pp ranks per replica, pool mesh
// {dp, pp, tp}) with the megatron weight adaptor. Trains one step,
// checkpoints, swaps to rollout, generates, swaps back, checkpoints again and
// scores the generated tokens with the trainer; writes what the tests compare
// into --out.
//
//   hybrid_rank_runner --rank R --world N --port P --prefix S --out DIR --model DIR
//                      [--mode bucketed|naive] [--dtype float32|bfloat16] [--offload none|all] [--tp T]
//                      [--swaps N]   (N train -> rollout -> train round trips; the first is checked in full)
//                      [--trainer fsdp|megatron --plugin FILE --train-tp T --train-pp P]
//                      [--lora-rank R]   (fsdp: LoRA adapters on every projection; the rollout gets merged weights)
//                      [--train-between-swaps 1]  (a train step before each later swap; the last one's
//                                                  rollout weights and the trainer's are written to compare)
//                      [--lora-base-cache auto|true|false]  (the hybrid option; false: every swap gathers all)
//                      [--gather-into-bucket true|false]  (the hybrid option; false: units gathered apart, copied in)
#include <malloc.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "engine_offloader.h"
#include "fsdp_engine.h"
#include "identity_adaptor.h"
#include "megatron_adaptor.h"
#include "native_engine.h"
#include "rlcore/core/plugin_loader.h"
#include "../../common/rank_runner.h"
#include "rlcore/config_node.h"
#include "rlcore/device.h"
#include "rlcore/error.h"
#include "rlcore/model/megatron_layout.h"
#include "rlcore/registry.h"
#include "rlcore/safetensors/safetensors.h"
#include "sharding_manager_impl.h"

namespace {

namespace fs = std::filesystem;
using namespace rlcore;

constexpr int64_t kRowsPerRank = 2;
constexpr int64_t kPrompt = 5;
constexpr int64_t kResponse = 6;

std::string arg(const testing::RunnerArgs& args, const std::string& key, const std::string& fallback = "") {
  return testing::runner_arg("hybrid_rank_runner", args, key, fallback);
}

// Prompts and responses of fixed lengths, no padding: the columns engines read.
Batch sequence_batch(const at::Tensor& prompts, const at::Tensor& responses) {
  Batch batch(prompts.size(0));
  const at::Tensor ids = at::cat({prompts, responses}, 1);
  batch.set(columns::kInputIds, ids);
  batch.set(columns::kAttentionMask, at::ones_like(ids));
  batch.set(columns::kResponses, responses);
  batch.set(columns::kResponseMask, at::ones_like(responses));
  return batch;
}

LossOutput mean_nll(const Batch&, const ModelOutput& output, const GlobalBatchInfo& global) {
  return LossOutput{-output.log_prob.sum() / global.num_tokens * static_cast<double>(global.dp_size), {}};
}

nlohmann::json stats_json(const SwapStats& s) {
  return {{"version", s.version},
          {"seconds", s.seconds},
          {"bytes_moved", s.bytes_moved},
          {"bytes_gathered", s.bytes_gathered},
          {"planned_peak_bytes", s.planned_peak_bytes},
          {"measured_peak_bytes", s.measured_peak_bytes},
          {"measured_per_swap", s.measured_per_swap},
          {"offload_s", s.offload_s},
          {"reload_s", s.reload_s}};
}

int64_t train_state_bytes(const TrainEngine& engine) {
  const TrainMemory m = engine.memory();
  return m.param_bytes + m.grad_bytes + m.optimizer_bytes;
}

// The actor and what the swap needs to read it: fsdp visits HF names,
// train-megatron its own layout (converted back to HF names for the checks).
struct Actor {
  std::shared_ptr<TrainEngine> engine;
  std::shared_ptr<WeightAdaptor> adaptor;
  bool megatron = false;
};

Actor make_actor(const std::map<std::string, std::string>& args, const ComponentContext& context, Registry& registry) {
  if (arg(args, "trainer", "fsdp") == "fsdp") {
    train_fsdp::FsdpOptions options;
    options.optim.lr = 1e-2;
    options.lora.lora_rank = std::stoll(arg(args, "lora-rank", "0"));
    return {std::make_shared<train_fsdp::FsdpEngine>(options, context),
            std::make_shared<hybrid_engine::IdentityAdaptor>(), false};
  }
  PluginLoader(registry).load_path(arg(args, "plugin"));
  const ConfigNode options =
      ConfigNode::parse("{megatron: {tensor_model_parallel_size: " + arg(args, "train-tp", "1") +
                            ", pipeline_model_parallel_size: " + arg(args, "train-pp", "1") + "}, optim: {lr: 0.01}}",
                        "hybrid_rank_runner");
  return {registry.create<TrainEngine>("megatron", options, context),
          std::make_shared<hybrid_engine::MegatronAdaptor>(
              model::ModelConfig::from_file(context.model_path + "/config.json")),
          true};
}

int run(const std::map<std::string, std::string>& args) {
  at::set_num_threads(1);
  // Every buffer of 1 MiB or more its own mapping, unmapped when freed (glibc
  // otherwise raises this threshold as big buffers are freed and keeps them in
  // its per-thread arenas): the resident set then follows the memory in use,
  // which the measured-peak tests compare with their bounds.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  const int64_t rank = std::stoll(arg(args, "rank"));
  const int64_t world = std::stoll(arg(args, "world"));
  const fs::path out = arg(args, "out");
  const std::string dtype = arg(args, "dtype", "float32");
  const int64_t tp = std::stoll(arg(args, "tp", "1"));
  const int64_t replica = std::stoll(arg(args, "train-tp", "1")) * std::stoll(arg(args, "train-pp", "1"));
  // Ranks that must see the same rows: a rollout TP group, a trainer replica.
  const int64_t row_group = rank / std::max(tp, replica);

  // No "dp" dimension without a model-parallel trainer: the trainer spans the whole pool (world).
  runtime::MeshShape mesh;
  if (replica > 1) {
    if (tp != 1) throw ValueError("hybrid_rank_runner: a model-parallel trainer is tested with --tp 1");
    mesh = {{"dp", world / replica},
            {"pp", std::stoll(arg(args, "train-pp", "1"))},
            {"tp", std::stoll(arg(args, "train-tp", "1"))}};
  } else if (tp > 1) {
    mesh = {{"rollout_dp", world / tp}, {kRolloutTpGroup, tp}};
  }
  const std::unique_ptr<CommContext> comm = testing::loopback_comm("hybrid_rank_runner", args, "hybrid_test", mesh);

  ComponentContext context;
  context.model_path = arg(args, "model");
  context.comm = comm.get();
  context.total_training_steps = 10;
  Registry registry;
  const Actor made = make_actor(args, context, registry);
  const std::shared_ptr<TrainEngine>& actor = made.engine;
  infer_native::NativeEngineOptions rollout_options;
  rollout_options.dtype = dtype;
  rollout_options.tensor_model_parallel_size = tp;
  auto rollout = std::make_shared<infer_native::NativeEngine>(rollout_options, context);

  // One step first, so gradients and optimizer state are not trivially zero.
  // The ranks of a TP group share their prompts: they generate together.
  const int64_t vocab = rollout->config().vocab_size;
  at::manual_seed(100 + row_group);
  const at::Tensor prompts = at::randint(1, vocab, {kRowsPerRank, kPrompt}, at::kLong);
  actor->train_step(sequence_batch(prompts, at::randint(1, vocab, {kRowsPerRank, kResponse}, at::kLong)), {}, mean_nll);
  actor->save_checkpoint((out / "before").string());

  hybrid_engine::HybridOptions options;
  const bool offload = arg(args, "offload", "none") == "all";
  options.offload_train_param = options.offload_train_grad = options.offload_train_optimizer = offload;
  options.lora_base_cache = arg(args, "lora-base-cache", "auto");
  options.gather_into_bucket = arg(args, "gather-into-bucket", "true") == "true";
  const auto mode =
      arg(args, "mode", "bucketed") == "naive" ? hybrid_engine::SwapMode::kNaive : hybrid_engine::SwapMode::kBucketed;
  const auto owned_manager = hybrid_engine::make_sharding_manager(options, mode);
  hybrid_engine::HybridShardingManager& manager = *owned_manager;
  const int64_t train_bytes = train_state_bytes(*actor);
  RolloutLayout layout;
  layout.tp_size = rollout->tp_size();
  layout.tp_rank = rollout->tp_rank();
  manager.attach({actor, rollout, made.adaptor, std::make_shared<hybrid_engine::EngineOffloader>(), layout});
  nlohmann::json result;
  result["tp_rank"] = layout.tp_rank;
  result["train_state_bytes"] = train_bytes;
  result["bucket_bytes"] = manager.plan().bucket_bytes;
  result["direct_gathers"] = manager.direct_gathers().direct_count();
  if (auto* gatherer = capability<GathersIntoBuffers>(*actor))
    result["gathers"] = gatherer->full_parameter_gathers().size();
  result["rollout_bytes_at_attach"] = rollout->bytes_held();

  // On the CPU a swap's measured peak is new resident memory: what malloc
  // still caches from the training step above would be reused without
  // showing. Trimming it first makes the figure the swap's whole need.
  release_cached_memory(at::kCPU);
  const SwapStats entered = manager.to_rollout(7);
  result["to_rollout"] = stats_json(entered);
  result["train_state_bytes_in_rollout"] = train_state_bytes(*actor);
  result["host_bytes_in_rollout"] = actor->memory().host_bytes;
  result["rollout_bytes_in_rollout"] = rollout->bytes_held();
  {                             // No view of the bucket may outlive the rollout: the next swap reuses its pages.
    bool shares_bucket = true;  // every parameter a view into one storage
    const auto params = rollout->parameters();
    for (const auto& [name, tensor] : params)
      shares_bucket = shares_bucket &&
                      tensor.storage().unsafeGetStorageImpl() == params.front().second.storage().unsafeGetStorageImpl();
    result["rollout_shares_one_storage"] = shares_bucket;
    save_safetensors(out / ("rollout_" + std::to_string(rank) + ".safetensors"), params);
  }

  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_tokens = kResponse;
  std::vector<std::vector<int32_t>> prompt_ids;
  for (int64_t row = 0; row < kRowsPerRank; ++row) {
    const at::Tensor p = prompts[row].to(at::kInt).contiguous();
    prompt_ids.emplace_back(p.data_ptr<int32_t>(), p.data_ptr<int32_t>() + kPrompt);
  }
  const GenerationOutput generated = rollout->generate(prompt_ids, greedy);
  result["generated_version"] = generated.weight_version;

  const SwapStats left = manager.to_train();
  result["to_train"] = stats_json(left);
  result["rollout_bytes_after"] = rollout->bytes_held();
  result["rollout_asleep_after"] = rollout->asleep();
  result["ledger_peak"] = manager.ledger().peak();
  // The full training parameters by HF name in the rollout dtype, for the bit-exact comparisons.
  const at::ScalarType rollout_dtype = rollout->dtype();
  const model::ModelConfig& config = rollout->config();
  auto full_parameters = [&] {
    NamedTensors full;
    actor->for_each_full_parameter([&](const std::string& name, const at::Tensor& t) {
      if (!made.megatron) {
        full.emplace_back(name, t.to(rollout_dtype).clone());
        return;
      }
      for (const std::string& hf : model::megatron::hf_sources(config, name))
        full.emplace_back(hf, model::megatron::to_hf(config, hf, t).to(rollout_dtype).clone());
    });
    return full;
  };

  // Later swaps run on what the first left behind (e.g. a lazily freed
  // bucket's pages): their measured peaks are checked too.
  const int64_t swaps = std::stoll(arg(args, "swaps", "1"));
  const bool train_between = arg(args, "train-between-swaps", "0") == "1";
  for (int64_t swap = 1; swap < swaps; ++swap) {
    if (train_between) {
      actor->train_step(sequence_batch(prompts, at::randint(1, vocab, {kRowsPerRank, kResponse}, at::kLong)), {},
                        mean_nll);
    }
    release_cached_memory(at::kCPU);
    result["last_to_rollout"] = stats_json(manager.to_rollout(7 + swap));
    if (train_between && swap + 1 == swaps) {
      save_safetensors(out / ("rollout_last_" + std::to_string(rank) + ".safetensors"), rollout->parameters());
      const NamedTensors full = full_parameters();
      if (rank == 0) save_safetensors(out / "full_last.safetensors", full);
    }
    result["last_to_train"] = stats_json(manager.to_train());
  }
  actor->save_checkpoint((out / "after").string());

  // The trainer's log-probs of the generated tokens (full length: no stop tokens).
  std::vector<at::Tensor> rows;
  std::vector<at::Tensor> rollout_logprobs;
  for (size_t i = 0; i < generated.token_ids.size(); ++i) {
    rows.push_back(at::tensor(std::vector<int64_t>(generated.token_ids[i].begin(), generated.token_ids[i].end())));
    rollout_logprobs.push_back(at::tensor(generated.logprobs[i]));
  }
  const ModelOutput scored = actor->forward(sequence_batch(prompts, at::stack(rows)), {});
  save_safetensors(out / ("logprobs_" + std::to_string(rank) + ".safetensors"),
                   {{"rollout", at::stack(rollout_logprobs)}, {"trainer", scored.log_prob.contiguous()}});

  const NamedTensors full = full_parameters();
  if (rank == 0) save_safetensors(out / "full.safetensors", full);

  std::ofstream(out / ("rank_" + std::to_string(rank) + ".json")) << result.dump(2);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return rlcore::testing::run_rank_main("hybrid_rank_runner", argc, argv, run); }
