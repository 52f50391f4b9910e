// One rank of a train-megatron test, run as its own process: joins the test's
// TCPStore with the pool mesh {dp, pp, tp}, optionally loads a checkpoint,
// scores this dp rank's rows of a fixed batch, trains, optionally saves, and
// writes what the test compares (outputs, metrics, full parameters) into --out.
//
//   megatron_rank_runner --rank R --world N --port P --model DIR --out DIR --tp T --pp P
//                        [--steps K] [--micro N] [--dtype float32|bfloat16] [--save DIR] [--load DIR]
//                        [--ep E] [--aux C] [--z C]   (expert parallelism: dp = edp x ep; router loss coefficients)
//                        [--replay 1]   (records the routing, then every pass replays it with layer 0's forced to
//                                        experts 0 and 1)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "megatron_engine.h"
#include "rlcore/columns.h"
#include "../../common/rank_runner.h"
#include "../../common/train_batch.h"
#include "rlcore/safetensors/safetensors.h"

namespace {

namespace fs = std::filesystem;
using namespace rlcore;

std::string arg(const testing::RunnerArgs& args, const std::string& key, const std::string& fallback = "") {
  return testing::runner_arg("megatron_rank_runner", args, key, fallback);
}

int run(const testing::RunnerArgs& args) {
  at::set_num_threads(1);
  const int64_t rank = std::stoll(arg(args, "rank"));
  const int64_t world = std::stoll(arg(args, "world"));
  const int64_t tp = std::stoll(arg(args, "tp", "1"));
  const int64_t pp = std::stoll(arg(args, "pp", "1"));
  const int64_t ep = std::stoll(arg(args, "ep", "1"));
  const fs::path out = arg(args, "out");

  runtime::MeshDim dp_dim{"dp", world / (tp * pp), {}};
  if (ep > 1) dp_dim.factors = {{"edp", dp_dim.size / ep, {}}, {"ep", ep, {}}};
  const std::unique_ptr<CommContext> comm =
      testing::loopback_comm("megatron_rank_runner", args, "megatron_test", {dp_dim, {"pp", pp, {}}, {"tp", tp, {}}});

  ComponentContext context;
  context.model_path = arg(args, "model");
  context.comm = comm.get();
  context.total_training_steps = 10;
  train_megatron::MegatronOptions options;
  options.optim.lr = 1e-2;
  options.optim.lr_warmup_steps = 1;
  options.optim.lr_scheduler_type = "cosine";
  options.optim.min_lr_ratio = 0.1;
  options.megatron.tensor_model_parallel_size = tp;
  options.megatron.pipeline_model_parallel_size = pp;
  options.megatron.dtype = arg(args, "dtype", "float32");
  options.megatron.expert_model_parallel_size = ep;
  options.megatron.moe_aux_loss_coeff = std::stod(arg(args, "aux", "0"));
  options.megatron.moe_z_loss_coeff = std::stod(arg(args, "z", "0"));
  options.use_remove_padding = arg(args, "remove-padding", "1") != "0";
  train_megatron::MegatronEngine engine(options, context);
  if (args.count("load")) engine.load_checkpoint(arg(args, "load"));

  ForwardOptions forward;
  forward.entropy = true;
  forward.micro_batching.micro_batch_size = std::stoll(arg(args, "micro", "0"));
  const int64_t dp = world / (tp * pp);
  const int64_t dp_rank = rank / (tp * pp);
  Batch mine = testing::train_batch(engine.model_config().vocab_size)
                   .slice(dp_rank * testing::kTrainRows / dp, (dp_rank + 1) * testing::kTrainRows / dp);
  NamedTensors outputs;
  if (args.count("replay")) {
    engine.set_routing_replay(false, true);
    engine.forward(mine, forward);
    at::Tensor routed = engine.take_routing();
    outputs.emplace_back("routing_recorded", routed.clone());
    routed.select(2, 0).select(-1, 0).fill_(0);
    routed.select(2, 0).select(-1, 1).fill_(1);
    mine.set(columns::kRoutedExperts, routed);
    engine.set_routing_replay(true, false);
  }

  nlohmann::json result = {{"rank", rank}, {"dp_rank", dp_rank}, {"step_at_start", engine.step()}};
  const ModelOutput before = engine.forward(mine, forward);
  for (int64_t s = 0, steps = std::stoll(arg(args, "steps", "2")); s < steps; ++s)
    result["metrics"].push_back(engine.train_step(mine, forward, testing::train_loss).metrics);
  if (args.count("save")) engine.save_checkpoint(arg(args, "save"));
  const ModelOutput after = engine.forward(mine, forward);
  outputs.emplace_back("log_prob_before", before.log_prob.contiguous());
  outputs.emplace_back("entropy_before", before.entropy.contiguous());
  outputs.emplace_back("log_prob_after", after.log_prob.contiguous());
  save_safetensors(out / ("outputs_" + std::to_string(rank) + ".safetensors"), outputs);
  NamedTensors params;
  engine.for_each_full_parameter(
      [&](const std::string& name, const at::Tensor& full) { params.emplace_back(name, full.clone()); });
  if (rank == 0) save_safetensors(out / "params.safetensors", params);
  result["memory_param_bytes"] = engine.memory().param_bytes;
  std::ofstream(out / ("rank_" + std::to_string(rank) + ".json")) << result.dump(2);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return rlcore::testing::run_rank_main("megatron_rank_runner", argc, argv, run); }
