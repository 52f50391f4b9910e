// enable_gradient_checkpointing: false keeps each layer's graph from the
// forward instead of recomputing it; the training result must not change, in
// one process and over 2 ranks (every layer's unit gathered at once).
#include "fsdp_testing.h"

#include "fsdp_engine.h"
#include "fsdp_options.h"
#include "../../common/train_batch.h"

using namespace fsdp_test;
using rlcore::train_fsdp::FsdpEngine;
using rlcore::train_fsdp::FsdpOptions;

namespace {

// The same ops on the same values, only run once instead of twice: equal up to
// kernel choice (the no-grad forward may take fused paths the recorded one does
// not). Two AdamW steps at lr 1e-2 amplify that rounding in near-zero gradients
// (libtorch 2.x's kernels reach 1.3e-5), so parameters agree to 1e-4, as in the
// megatron tests.
constexpr double kAfterAdamW = 1e-4;

std::vector<at::Tensor> train_two_steps(const TempDir& model, bool checkpointing, const std::string& dtype,
                                        std::vector<double>* grad_norms) {
  FsdpOptions options;
  options.optim.lr = 1e-2;
  options.enable_gradient_checkpointing = checkpointing;
  options.fsdp_config.mixed_precision.param_dtype = dtype;
  rlcore::ComponentContext context;
  context.model_path = model.str();
  context.total_training_steps = 4;
  FsdpEngine engine(options, context);
  const rlcore::Batch batch = rlcore::testing::train_batch(tiny_config().vocab_size);
  rlcore::ForwardOptions forward;
  forward.micro_batching.micro_batch_size = 3;  // several micro-batches per layer
  for (int step = 0; step < 2; ++step)
    grad_norms->push_back(engine.train_step(batch, forward, rlcore::testing::train_loss).metrics.at("grad_norm"));
  std::vector<at::Tensor> params;
  engine.for_each_full_parameter([&](const std::string&, const at::Tensor& full) { params.push_back(full.clone()); });
  return params;
}

}  // namespace

TEST_CASE("training without gradient checkpointing equals training with it", "[fsdp][checkpointing]") {
  TempDir model;
  write_tiny_checkpoint(model.path());
  for (const std::string dtype : {"float32", "bfloat16"}) {
    INFO("compute dtype " << dtype);
    std::vector<double> norms_recompute, norms_kept;
    const auto recomputed = train_two_steps(model, true, dtype, &norms_recompute);
    const auto kept = train_two_steps(model, false, dtype, &norms_kept);
    REQUIRE(recomputed.size() == kept.size());
    double worst = 0;
    for (size_t i = 0; i < kept.size(); ++i)
      worst = std::max(worst, (kept[i] - recomputed[i]).abs().max().item<double>());
    CHECK(worst < kAfterAdamW);
    for (size_t s = 0; s < norms_kept.size(); ++s) CHECK(norms_kept[s] == Approx(norms_recompute[s]).epsilon(1e-4));
  }
}

TEST_CASE("without gradient checkpointing 2 ranks train as with it", "[fsdp][checkpointing][parallel]") {
  TempDir model;
  write_tiny_checkpoint(model.path());
  TempDir work;
  const std::vector<std::string> common = {"--model", model.str(), "--scenario", "train",
                                           "--steps", "2",         "--micro",    "2"};
  auto with = [&](const std::string& checkpointing) {
    std::vector<std::string> args = common;
    args.insert(args.end(), {"--checkpointing", checkpointing});
    return args;
  };
  const auto recomputed = run_ranks(2, work.path() / "recompute", with("1"));
  const auto kept = run_ranks(2, work.path() / "kept", with("0"));
  CHECK(max_abs_diff(load_tensors(work.path() / "recompute" / "params.safetensors"),
                     load_tensors(work.path() / "kept" / "params.safetensors")) < kAfterAdamW);
  for (size_t step = 0; step < 2; ++step) {
    CHECK(kept[0]["metrics"][step]["grad_norm"].get<double>() ==
          Approx(recomputed[0]["metrics"][step]["grad_norm"].get<double>()).epsilon(1e-4));
  }
}
