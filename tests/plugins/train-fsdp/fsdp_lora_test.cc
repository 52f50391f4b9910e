// LoRA in the fsdp engine: B = 0 leaves the first forward the base model's,
// training moves only the adapters (no AdamW state for the base), and the
// trained model equals a plain one holding the merged W + (alpha / r) B A.
#include "fsdp_testing.h"

#include <iostream>

#include "fsdp_engine.h"
#include "fsdp_options.h"
#include "rlcore/error.h"

using namespace fsdp_test;
using rlcore::fsdp::FsdpEngine;
using rlcore::fsdp::FsdpOptions;

namespace {

rlcore::Batch lora_batch(int64_t vocab) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(11);
  const at::Tensor ids = at::randint(1, vocab, {4, 8}, generator, at::kLong);
  rlcore::Batch batch(4);
  batch.set("input_ids", ids);
  batch.set("attention_mask", at::ones({4, 8}, at::kLong));
  batch.set("responses", ids.slice(1, 4).clone());
  batch.set("response_mask", at::ones({4, 4}, at::kFloat));
  batch.set("advantages", at::randn({4, 4}, generator));
  return batch;
}

rlcore::LossOutput pg_loss(const rlcore::Batch& micro, const rlcore::ModelOutput& out,
                           const rlcore::GlobalBatchInfo& g) {
  const at::Tensor loss =
      -(out.log_prob * micro.tensor("advantages") * micro.tensor("response_mask")).sum() / g.num_tokens * g.dp_size;
  return {loss, {{"loss", loss.detach()}}};
}

rlcore::ComponentContext context_for(const std::string& model) {
  rlcore::ComponentContext context;
  context.model_path = model;
  context.total_training_steps = 8;
  return context;
}

FsdpOptions lora_options(int64_t rank, std::vector<std::string> targets = {"all-linear"}) {
  FsdpOptions options;
  options.optim.lr = 1e-2;
  options.lora.lora_rank = rank;
  options.lora.lora_alpha = 16;
  options.lora.target_modules = std::move(targets);
  return options;
}

rlcore::NamedTensors full_parameters(FsdpEngine& engine) {
  rlcore::NamedTensors out;
  engine.for_each_full_parameter(
      [&](const std::string& name, const at::Tensor& full) { out.emplace_back(name, full.clone()); });
  return out;
}

// The base weights with (alpha / r) B A added to each adapted projection.
rlcore::NamedTensors merged_parameters(FsdpEngine& engine) {
  rlcore::NamedTensors params = full_parameters(engine);
  at::NoGradGuard no_grad;
  for (const auto& pair : engine.lora().pairs()) {
    bool found = false;
    for (auto& [name, tensor] : params) {
      if (name != pair->module + ".weight") continue;
      tensor = tensor + at::matmul(pair->b, pair->a) * engine.lora().scaling();
      found = true;
    }
    REQUIRE(found);
  }
  return params;
}

}  // namespace

TEST_CASE("LoRA's first forward is the base model's (B = 0)", "[fsdp][lora]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path());
  FsdpEngine base(FsdpOptions{}, context_for(dir.str()));
  FsdpEngine lora(lora_options(4), context_for(dir.str()));
  REQUIRE(lora.lora().enabled());
  CHECK(lora.lora().pairs().size() == 7 * 2);  // every projection of both layers
  const rlcore::Batch batch = lora_batch(tiny_config().vocab_size);
  const at::Tensor expected = base.forward(batch, {}).log_prob;
  const at::Tensor got = lora.forward(batch, {}).log_prob;
  // q/k/v are one fused GEMM in the base model and three with adapters: the same sums, maybe blocked differently.
  CHECK((got - expected).abs().max().item<double>() < 1e-6);
  // Adapters only on projections that are never fused: bit for bit the base model.
  FsdpEngine unfused(lora_options(4, {"o_proj", "down_proj"}), context_for(dir.str()));
  CHECK(at::equal(unfused.forward(batch, {}).log_prob, expected));
}

TEST_CASE("LoRA training moves only the adapters and keeps no AdamW state for the base", "[fsdp][lora]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path());
  FsdpEngine full(FsdpOptions{}, context_for(dir.str()));
  FsdpEngine lora(lora_options(4, {"q_proj", "v_proj"}), context_for(dir.str()));
  REQUIRE(lora.lora().pairs().size() == 2 * 2);
  const rlcore::NamedTensors before = full_parameters(lora);
  std::vector<at::Tensor> a_before;
  for (const auto& pair : lora.lora().pairs()) a_before.push_back(pair->a.detach().clone());

  const rlcore::Batch batch = lora_batch(tiny_config().vocab_size);
  for (int step = 0; step < 3; ++step) {
    const auto metrics = lora.train_step(batch, {}, pg_loss).metrics;
    CHECK(metrics.at("grad_norm") > 0);
  }
  const rlcore::NamedTensors after = full_parameters(lora);
  REQUIRE(after.size() == before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    INFO(before[i].first);
    CHECK(at::equal(before[i].second, after[i].second));
  }
  for (size_t i = 0; i < lora.lora().pairs().size(); ++i) {
    const auto& pair = lora.lora().pairs()[i];
    INFO(pair->module);
    CHECK(pair->b.abs().max().item<double>() > 0);
    CHECK(!at::equal(pair->a, a_before[i]));
  }

  const rlcore::TrainMemory with = lora.memory();
  const rlcore::TrainMemory without = full.memory();
  // Adapters of q_proj [32 -> 32] and v_proj [32 -> 16], r = 4, two layers: (4*32 + 32*4 + 4*32 + 16*4) * 2 floats.
  const int64_t adapter_bytes = (4 * 32 + 32 * 4 + 4 * 32 + 16 * 4) * 2 * 4;
  CHECK(with.optimizer_bytes == 2 * adapter_bytes);
  CHECK(with.grad_bytes == adapter_bytes);
  CHECK(without.optimizer_bytes == 2 * without.grad_bytes);
  CHECK(with.optimizer_bytes * 20 < without.optimizer_bytes);
  std::cout << "[lora] optimizer bytes: full " << without.optimizer_bytes << ", lora r=4 q/v " << with.optimizer_bytes
            << "; grad bytes: full " << without.grad_bytes << ", lora " << with.grad_bytes << "\n";
}

TEST_CASE("a trained LoRA model equals a plain model with the merged weights", "[fsdp][lora]") {
  TempDir dir, merged_dir;
  write_tiny_checkpoint(dir.path());
  FsdpEngine lora(lora_options(4), context_for(dir.str()));
  const rlcore::Batch batch = lora_batch(tiny_config().vocab_size);
  for (int step = 0; step < 3; ++step) lora.train_step(batch, {}, pg_loss);
  rlcore::write_hf_checkpoint(merged_dir.path(), tiny_config(), merged_parameters(lora),
                              rlcore::builtin_tokenizer_files());
  FsdpEngine merged(FsdpOptions{}, context_for(merged_dir.str()));
  FsdpEngine base(FsdpOptions{}, context_for(dir.str()));
  const at::Tensor got = lora.forward(batch, {}).log_prob;
  CHECK((got - merged.forward(batch, {}).log_prob).abs().max().item<double>() < 1e-5);
  CHECK((got - base.forward(batch, {}).log_prob).abs().max().item<double>() > 1e-3);  // the adapters did something
}

TEST_CASE("bad LoRA options name their key", "[fsdp][lora]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path());
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { FsdpEngine(lora_options(-1), context_for(dir.str())); }),
             Catch::Contains("lora.lora_rank"));
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { FsdpEngine(lora_options(4, {"qkv"}), context_for(dir.str())); }),
             Catch::Contains("lora.target_modules") && Catch::Contains("'qkv'"));
}
