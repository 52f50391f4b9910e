// One rank of a train-megatron test, run as its own process: joins the test's
// TCPStore with the pool mesh {dp, pp, tp}, optionally loads a checkpoint,
// scores this dp rank's rows of a fixed batch, trains, optionally saves, and
// writes what the test compares (outputs, metrics, full parameters) into --out.
//
//   megatron_rank_runner --rank R --world N --port P --model DIR --out DIR --tp T --pp P
//                        [--steps K] [--micro N] [--dtype float32|bfloat16] [--save DIR] [--load DIR]
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "megatron_engine.h"
#include "rlcore/core/runtime/process_groups.h"
#include "../../common/rank_runner.h"
#include "rlcore/safetensors.h"

namespace {

namespace fs = std::filesystem;
using namespace rlcore;

constexpr int64_t kRows = 8;
constexpr int64_t kPrompt = 6;
constexpr int64_t kResponse = 5;

std::string arg(const testing::RunnerArgs& args, const std::string& key, const std::string& fallback = "") {
  return testing::runner_arg("megatron_rank_runner", args, key, fallback);
}

// The same global batch everywhere: left-padded prompts, right-padded responses, random advantages.
Batch global_batch(int64_t vocab) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(1234);
  const int64_t len = kPrompt + kResponse;
  at::Tensor ids = at::randint(1, vocab, {kRows, len}, generator, at::kLong);
  at::Tensor mask = at::ones({kRows, len}, at::kLong);
  for (int64_t row = 0; row < kRows; ++row) {
    mask[row].slice(0, 0, row % 3).zero_();
    mask[row].slice(0, len - (row * 2) % kResponse).zero_();
  }
  ids = ids * mask;
  Batch batch(kRows);
  batch.set("input_ids", ids);
  batch.set("attention_mask", mask);
  batch.set("responses", ids.slice(1, kPrompt).clone());
  batch.set("response_mask", mask.slice(1, kPrompt).to(at::kFloat));
  batch.set("advantages", at::randn({kRows, kResponse}, generator));
  return batch;
}

// A token-mean policy-gradient loss over the global batch (x dp_size: gradients are averaged over dp).
LossOutput test_loss(const Batch& micro, const ModelOutput& out, const GlobalBatchInfo& global) {
  const double scale = static_cast<double>(global.dp_size) / global.num_tokens;
  const at::Tensor loss = -(out.log_prob * micro.tensor("advantages") * micro.tensor("response_mask")).sum() * scale;
  return LossOutput{loss, {{"loss", loss.detach()}, {"entropy", out.entropy.mean().detach()}}};
}

int run(const testing::RunnerArgs& args) {
  at::set_num_threads(1);
  const int64_t rank = std::stoll(arg(args, "rank"));
  const int64_t world = std::stoll(arg(args, "world"));
  const int64_t tp = std::stoll(arg(args, "tp", "1"));
  const int64_t pp = std::stoll(arg(args, "pp", "1"));
  const fs::path out = arg(args, "out");

  ProcessGroupOptions pg;
  pg.store_host = "127.0.0.1";
  pg.store_port = std::stoi(arg(args, "port"));
  pg.prefix = "megatron_test/" + arg(args, "prefix", "run");
  pg.rank = rank;
  pg.world_size = world;
  pg.local_address = "127.0.0.1";
  pg.timeout = std::chrono::seconds(60);
  pg.mesh = {{"dp", world / (tp * pp)}, {"pp", pp}, {"tp", tp}};
  const std::unique_ptr<CommContext> comm = make_comm_context(pg);

  ComponentContext context;
  context.model_path = arg(args, "model");
  context.comm = comm.get();
  context.total_training_steps = 10;
  megatron::MegatronOptions options;
  options.optim.lr = 1e-2;
  options.optim.lr_warmup_steps = 1;
  options.optim.lr_scheduler_type = "cosine";
  options.optim.min_lr_ratio = 0.1;
  options.megatron.tensor_model_parallel_size = tp;
  options.megatron.pipeline_model_parallel_size = pp;
  options.megatron.dtype = arg(args, "dtype", "float32");
  megatron::MegatronEngine engine(options, context);
  if (args.count("load")) engine.load_checkpoint(arg(args, "load"));

  ForwardOptions forward;
  forward.entropy = true;
  forward.micro_batching.micro_batch_size = std::stoll(arg(args, "micro", "0"));
  const int64_t dp = world / (tp * pp);
  const int64_t dp_rank = rank / (tp * pp);
  const Batch mine = global_batch(engine.model_config().vocab_size).slice(dp_rank * kRows / dp, (dp_rank + 1) * kRows / dp);

  nlohmann::json result = {{"rank", rank}, {"dp_rank", dp_rank}, {"step_at_start", engine.step()}};
  const ModelOutput before = engine.forward(mine, forward);
  for (int64_t s = 0, steps = std::stoll(arg(args, "steps", "2")); s < steps; ++s)
    result["metrics"].push_back(engine.train_step(mine, forward, test_loss).metrics);
  if (args.count("save")) engine.save_checkpoint(arg(args, "save"));
  const ModelOutput after = engine.forward(mine, forward);
  save_safetensors(out / ("outputs_" + std::to_string(rank) + ".safetensors"),
                   {{"log_prob_before", before.log_prob.contiguous()},
                    {"entropy_before", before.entropy.contiguous()},
                    {"log_prob_after", after.log_prob.contiguous()}});
  NamedTensors params;
  engine.for_each_full_parameter([&](const std::string& name, const at::Tensor& full) {
    params.emplace_back(name, full.clone());
  });
  if (rank == 0) save_safetensors(out / "params.safetensors", params);
  result["memory_param_bytes"] = engine.memory().param_bytes;
  std::ofstream(out / ("rank_" + std::to_string(rank) + ".json")) << result.dump(2);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return rlcore::testing::run_rank_main("megatron_rank_runner", argc, argv, run); }
