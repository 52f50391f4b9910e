// One rank of a train-fsdp test scenario, run as its own process by the Catch
// tests (tests/plugins/train-fsdp/*_test.cc): rendezvous through the test's
// TCPStore, run the scenario on this rank's rows of a fixed batch, and write
// what the test compares into --out.
//
//   fsdp_rank_runner --scenario train|resume|offload|export|frozen|reduce --rank R --world N
//                    --port P --model DIR --out DIR [--steps K] [--save-at K --ckpt DIR]
//                    [--micro N] [--dynamic TOKENS] [--dtype float32|bfloat16] [--head lm|value]
//                    [--reduce-dtype float32|bfloat16] [--checkpointing 1|0] [--lora-rank R]
//                    [--remove-padding 1|0] [--sp N]
//   fsdp_rank_runner --scenario draw --out DIR: draws from the default CPU generator, unseeded
//                    (rank_pool_test: every pooled scenario starts from the same random state)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "dp_comm.h"
#include "fsdp_engine.h"
#include "../../common/rank_runner.h"
#include "../../common/train_batch.h"
#include "fsdp_reduce_input.h"
#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"

namespace {

namespace fs = std::filesystem;
using namespace rlcore;

std::string arg(const testing::RunnerArgs& args, const std::string& key, const std::string& fallback = "") {
  return testing::runner_arg("fsdp_rank_runner", args, key, fallback);
}

void write_json(const fs::path& path, const nlohmann::json& json) { std::ofstream(path) << json.dump(2); }

nlohmann::json memory_json(const TrainMemory& memory) {
  return {{"param", memory.param_bytes},
          {"grad", memory.grad_bytes},
          {"optimizer", memory.optimizer_bytes},
          {"host", memory.host_bytes}};
}

// Every parameter in full (collective); rank 0 writes them.
void write_params(train_fsdp::FsdpEngine& engine, const fs::path& path, int64_t rank) {
  NamedTensors params;
  engine.for_each_full_parameter(
      [&](const std::string& name, const at::Tensor& full) { params.emplace_back(name, full.clone()); });
  if (rank == 0) save_safetensors(path, params);
}

struct Snapshot {
  std::vector<at::Tensor> tensors;
};

// DpComm::all_reduce_mean of a rank-dependent tensor whose values bf16 cannot
// hold, in fp32 and in bf16; the test recomputes both results from reduce_input().
void write_reductions(const CommContext& comm, const fs::path& path, int64_t rank) {
  const train_fsdp::DpComm dp(&comm);
  const at::Tensor input = testing::reduce_input(rank);
  NamedTensors out = {{"input", input}};
  for (const auto& [name, dtype] : {std::pair{"float32", at::kFloat}, std::pair{"bfloat16", at::kBFloat16}}) {
    at::Tensor mean = input.clone();
    dp.all_reduce_mean(mean, dtype);
    out.emplace_back(name, mean);
  }
  save_safetensors(path, out);
}

Snapshot snapshot(const train_fsdp::FsdpEngine& engine) {
  Snapshot out;
  for (const ParameterShard& shard : engine.parameter_shards()) out.tensors.push_back(shard.local.clone());
  return out;
}

int run(const std::map<std::string, std::string>& args) {
  at::set_num_threads(1);
  const std::string scenario = arg(args, "scenario");
  if (scenario == "draw") {
    save_safetensors(fs::path(arg(args, "out")) / "draw.safetensors", {{"draw", at::rand({8})}});
    return 0;
  }
  const int64_t rank = std::stoll(arg(args, "rank"));
  const int64_t world = std::stoll(arg(args, "world"));
  const fs::path out_dir = arg(args, "out");

  // Sequence parallelism: the pool's {dp, sp} mesh, as the trainer makes it; a group's ranks share rows.
  const int64_t sp = std::stoll(arg(args, "sp", "1"));
  runtime::MeshShape mesh;
  if (sp > 1) mesh = {runtime::MeshDim{"dp", world / sp, {}}, runtime::MeshDim{"sp", sp, {}}};
  const std::unique_ptr<CommContext> comm =
      testing::loopback_comm("fsdp_rank_runner", args, "fsdp_test", std::move(mesh));

  ComponentContext context;
  context.model_path = arg(args, "model");
  context.comm = comm.get();
  context.model_head = arg(args, "head", "lm");
  context.trainable = scenario != "frozen";
  context.total_training_steps = 10;
  train_fsdp::FsdpOptions options;
  options.optim.lr = 1e-2;
  options.optim.lr_warmup_steps = 1;
  options.optim.lr_scheduler_type = "cosine";
  options.optim.min_lr_ratio = 0.1;
  options.grad_clip = std::stod(arg(args, "grad-clip", "1.0"));
  options.fsdp_config.dtype = arg(args, "dtype", "float32");
  options.fsdp_config.mixed_precision.reduce_dtype = arg(args, "reduce-dtype", "float32");
  options.enable_gradient_checkpointing = arg(args, "checkpointing", "1") != "0";
  options.use_remove_padding = arg(args, "remove-padding", "1") != "0";
  options.ulysses_sequence_parallel_size = sp;
  options.lora.lora_rank = std::stoll(arg(args, "lora-rank", "0"));
  train_fsdp::FsdpEngine engine(options, context);

  ForwardOptions forward;
  forward.entropy = true;
  forward.micro_batching.micro_batch_size = std::stoll(arg(args, "micro", "0"));
  const int64_t dynamic = std::stoll(arg(args, "dynamic", "0"));
  if (dynamic > 0) {
    forward.micro_batching.dynamic = true;
    forward.micro_batching.max_token_len = dynamic;
  }
  const Batch batch = testing::train_batch(engine.model_config().vocab_size);
  const int64_t dp = world / sp;
  const int64_t dp_rank = rank / sp;
  const Batch mine = batch.slice(dp_rank * testing::kTrainRows / dp, (dp_rank + 1) * testing::kTrainRows / dp);

  nlohmann::json result = {{"rank", rank}, {"world", world}};
  result["memory_initial"] = memory_json(engine.memory());
  auto train = [&](int64_t steps) {
    for (int64_t s = 0; s < steps; ++s)
      result["metrics"].push_back(engine.train_step(mine, forward, testing::train_loss).metrics);
  };

  if (scenario == "train") {
    const int64_t save_at = std::stoll(arg(args, "save-at", "-1"));
    const int64_t steps = std::stoll(arg(args, "steps", "3"));
    for (int64_t s = 0; s < steps; ++s) {
      if (s == save_at) engine.save_checkpoint(arg(args, "ckpt"));
      train(1);
    }
    if (steps == save_at) engine.save_checkpoint(arg(args, "ckpt"));
  } else if (scenario == "resume") {
    engine.load_checkpoint(arg(args, "ckpt"));
    result["loaded_step"] = engine.step();
    train(std::stoll(arg(args, "steps", "1")));
  } else if (scenario == "offload") {
    train(1);
    const Snapshot before = snapshot(engine);
    const TrainMemory resident = engine.memory();
    engine.offload(OffloadSet::kAll);
    result["memory_offloaded"] = memory_json(engine.memory());
    engine.reload(OffloadSet::kAll);
    result["memory_reloaded"] = memory_json(engine.memory());
    const Snapshot after = snapshot(engine);
    bool identical = before.tensors.size() == after.tensors.size();
    for (size_t i = 0; identical && i < before.tensors.size(); ++i)
      identical = at::equal(before.tensors[i], after.tensors[i]);
    result["bit_identical"] = identical;
    result["memory_resident"] = memory_json(resident);
    engine.offload(OffloadSet::kParams | OffloadSet::kOptimizer);  // train_step must bring them back itself
    train(1);
    result["memory_after_offloaded_step"] = memory_json(engine.memory());
  } else if (scenario == "export") {
    engine.export_hf((out_dir / "hf").string());
  } else if (scenario == "reduce") {
    write_reductions(*comm, out_dir / ("reduce_" + std::to_string(rank) + ".safetensors"), rank);
  } else if (scenario == "frozen") {
    try {
      engine.train_step(mine, forward, testing::train_loss);
      result["frozen_error"] = "";
    } catch (const ValueError& e) {
      result["frozen_error"] = e.what();
    }
  } else {
    throw ConfigError("fsdp_rank_runner: unknown scenario '" + scenario + "'");
  }
  result["step"] = engine.step();
  result["memory"] = memory_json(engine.memory());
  const ModelOutput eval = engine.forward(mine, forward);
  save_safetensors(out_dir / ("outputs_" + std::to_string(rank) + ".safetensors"),
                   {{"out", eval.values.defined() ? eval.values : eval.log_prob},
                    {"entropy", eval.entropy.defined() ? eval.entropy : at::zeros({1})}});
  write_params(engine, out_dir / "params.safetensors", rank);
  write_json(out_dir / ("rank_" + std::to_string(rank) + ".json"), result);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return rlcore::testing::run_rank_main("fsdp_rank_runner", argc, argv, run); }
