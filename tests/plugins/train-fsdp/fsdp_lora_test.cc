// LoRA in the fsdp engine: B = 0 leaves the first forward the base model's,
// training moves only the adapters (no AdamW state for the base), and the
// trained model equals a plain one holding the merged W + (alpha / r) B A.
#include "lora_testing.h"

#include <cmath>
#include <iostream>

#include <ATen/core/grad_mode.h>

#include "fsdp_engine.h"
#include "fsdp_options.h"
#include "rlcore/error.h"
#include "../../common/reference_python.h"

using namespace fsdp_test;
using namespace lora_test;
using rlcore::train_fsdp::FsdpEngine;
using rlcore::train_fsdp::FsdpOptions;

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
  // q/k/v are one fused GEMM in the base model and three with adapters: the same sums, maybe
  // blocked differently. Log-probs near -5 are 4.8e-7 apart in fp32: a few ulps.
  CHECK((got - expected).abs().max().item<double>() < 1e-5);
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
  const rlcore::NamedTensors before = base_parameters(lora);
  std::vector<at::Tensor> a_before;
  for (const auto& pair : lora.lora().pairs()) a_before.push_back(pair->a.detach().clone());

  const rlcore::Batch batch = lora_batch(tiny_config().vocab_size);
  for (int step = 0; step < 3; ++step) {
    const auto metrics = lora.train_step(batch, {}, pg_loss).metrics;
    CHECK(metrics.at("grad_norm") > 0);
  }
  const rlcore::NamedTensors after = base_parameters(lora);
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

TEST_CASE("a trained LoRA model equals a plain model with the merged weights it exports", "[fsdp][lora]") {
  TempDir dir, merged_dir;
  write_tiny_checkpoint(dir.path());
  FsdpEngine lora(lora_options(4), context_for(dir.str()));
  const rlcore::Batch batch = lora_batch(tiny_config().vocab_size);
  for (int step = 0; step < 3; ++step) lora.train_step(batch, {}, pg_loss);

  // for_each_full_parameter (what the rollout and the HF export get) is W + (alpha / r) B A under the base names.
  const rlcore::NamedTensors merged = named_full_parameters(lora);
  const rlcore::NamedTensors base = base_parameters(lora);
  REQUIRE(merged.size() == base.size());
  size_t adapted = 0;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < base.size(); ++i) {
    INFO(base[i].first);
    REQUIRE(merged[i].first == base[i].first);
    const rlcore::train_fsdp::LoraPair* pair = lora.lora().adapter_of(base[i].first);
    at::Tensor expected = base[i].second;
    if (pair != nullptr) {
      expected = expected + at::matmul(pair->b, pair->a) * (16.0 / 4);
      ++adapted;
    }
    CHECK((merged[i].second - expected).abs().max().item<double>() < 1e-6);
  }
  CHECK(adapted == 14);

  rlcore::write_hf_checkpoint(merged_dir.path(), tiny_config(), merged, rlcore::builtin_tokenizer_files());
  FsdpEngine plain(FsdpOptions{}, context_for(merged_dir.str()));
  FsdpEngine untrained(FsdpOptions{}, context_for(dir.str()));
  const at::Tensor got = lora.forward(batch, {}).log_prob;
  CHECK((got - plain.forward(batch, {}).log_prob).abs().max().item<double>() < 1e-5);
  CHECK((got - untrained.forward(batch, {}).log_prob).abs().max().item<double>() > 1e-3);  // the adapters moved
}

TEST_CASE("a LoRA checkpoint round trip keeps the adapters and their AdamW state", "[fsdp][lora]") {
  TempDir dir, saved;
  write_tiny_checkpoint(dir.path());
  const rlcore::Batch batch = lora_batch(tiny_config().vocab_size);
  FsdpEngine first(lora_options(4, {"q_proj", "v_proj"}), context_for(dir.str()));
  for (int step = 0; step < 2; ++step) first.train_step(batch, {}, pg_loss);
  first.save_checkpoint(saved.str());
  CHECK(fs::exists(saved.path() / "lora_adapter" / "adapter_config.json"));
  CHECK(fs::exists(saved.path() / "lora_adapter" / "adapter_model.safetensors"));

  FsdpOptions other_seed = lora_options(4, {"q_proj", "v_proj"});
  other_seed.seed = 99;  // different initial A: only the load can make them equal
  FsdpEngine second(other_seed, context_for(dir.str()));
  second.load_checkpoint(saved.str());
  for (size_t i = 0; i < first.lora().pairs().size(); ++i) {
    INFO(first.lora().pairs()[i]->module);
    CHECK(at::equal(first.lora().pairs()[i]->a, second.lora().pairs()[i]->a));
    CHECK(at::equal(first.lora().pairs()[i]->b, second.lora().pairs()[i]->b));
  }
  // The next step continues identically (same moments, same step count).
  first.train_step(batch, {}, pg_loss);
  second.train_step(batch, {}, pg_loss);
  CHECK(second.step() == 3);
  for (size_t i = 0; i < first.lora().pairs().size(); ++i) {
    CHECK(at::equal(first.lora().pairs()[i]->a, second.lora().pairs()[i]->a));
    CHECK(at::equal(first.lora().pairs()[i]->b, second.lora().pairs()[i]->b));
  }
  FsdpEngine other_rank(lora_options(8, {"q_proj", "v_proj"}), context_for(dir.str()));
  CHECK_THAT(error_of<rlcore::FormatError>([&] { other_rank.load_checkpoint(saved.str()); }),
             Catch::Contains("lora_rank 4") && Catch::Contains("lora.lora_rank 8"));
}

TEST_CASE("a frozen engine (rlcore export) loading a LoRA checkpoint serves base + the checkpoint's adapters",
          "[fsdp][lora]") {
  TempDir dir, saved;
  write_tiny_checkpoint(dir.path());
  FsdpEngine trained(lora_options(4, {"q_proj", "v_proj"}), context_for(dir.str()));
  const rlcore::Batch batch = lora_batch(tiny_config().vocab_size);
  for (int step = 0; step < 2; ++step) trained.train_step(batch, {}, pg_loss);
  trained.save_checkpoint(saved.str());

  rlcore::ComponentContext frozen_context = context_for(dir.str());
  frozen_context.trainable = false;
  FsdpEngine frozen(FsdpOptions{}, frozen_context);  // no lora options: they come from the checkpoint
  frozen.load_checkpoint(saved.str());
  CHECK(frozen.lora().rank() == 4);
  CHECK(frozen.lora().target_names() == std::vector<std::string>{"q_proj", "v_proj"});
  const rlcore::NamedTensors expected = named_full_parameters(trained);
  const rlcore::NamedTensors got = named_full_parameters(frozen);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(got[i].first);
    CHECK(at::equal(got[i].second, expected[i].second));
  }
  CHECK(at::equal(frozen.forward(batch, {}).log_prob, trained.forward(batch, {}).log_prob));
  // A trainable engine still has to be configured for the rank it resumes.
  FsdpEngine plain(FsdpOptions{}, context_for(dir.str()));
  CHECK_THAT(error_of<rlcore::FormatError>([&] { plain.load_checkpoint(saved.str()); }),
             Catch::Contains("lora_rank 4"));
}

TEST_CASE("lora.target_modules takes verl's scalar all-linear as well as a list", "[fsdp][lora]") {
  const auto parse = [](const std::string& yaml) {
    return rlcore::train_fsdp::fsdp_options_schema().parse(rlcore::ConfigNode::parse(yaml, "test")).lora;
  };
  CHECK(parse("{lora: {lora_rank: 2, target_modules: all-linear}}").target_modules ==
        std::vector<std::string>{"all-linear"});
  CHECK(parse("{lora: {lora_rank: 2, target_modules: [q_proj, v_proj]}}").target_modules ==
        std::vector<std::string>{"q_proj", "v_proj"});
}

TEST_CASE("bad LoRA options name their key", "[fsdp][lora]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path());
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { FsdpEngine(lora_options(-1), context_for(dir.str())); }),
             Catch::Contains("lora.lora_rank"));
  CHECK_THAT(error_of<rlcore::ConfigError>([&] { FsdpEngine(lora_options(4, {"qkv"}), context_for(dir.str())); }),
             Catch::Contains("lora.target_modules") && Catch::Contains("'qkv'"));
}

TEST_CASE("the saved adapter loads in PEFT with rlcore's log-probs and merged weights", "[fsdp][lora][peft]") {
  TempDir dir, saved, scratch;
  write_tiny_checkpoint(dir.path());
  FsdpEngine lora(lora_options(4), context_for(dir.str()));
  const rlcore::Batch batch = lora_batch(tiny_config().vocab_size);
  for (int step = 0; step < 3; ++step) lora.train_step(batch, {}, pg_loss);
  lora.save_checkpoint(saved.str());
  rlcore::save_safetensors(scratch.path() / "inputs.safetensors", {{"input_ids", batch.tensor("input_ids")}});

  const fs::path out = scratch.path() / "peft.safetensors";
  rlcore_test::run_reference(rlcore_test::reference_script("plugins/train-fsdp/reference/peft_adapter.py"),
                             {dir.str(), (saved.path() / "lora_adapter").string(),
                              (scratch.path() / "inputs.safetensors").string(), out.string()});
  const rlcore::SafetensorsFile peft(out);
  // Positions 3..6 predict the response tokens 4..7 (no padding).
  const at::Tensor peft_log_prob = at::log_softmax(peft.load("logits").slice(1, 3, 7), -1)
                                       .gather(-1, batch.tensor("responses").unsqueeze(-1))
                                       .squeeze(-1);
  CHECK((lora.forward(batch, {}).log_prob - peft_log_prob).abs().max().item<double>() < 1e-5);

  size_t compared = 0;
  for (const auto& [name, merged] : named_full_parameters(lora)) {
    INFO(name);
    REQUIRE(peft.contains("merged." + name));
    CHECK((merged - peft.load("merged." + name)).abs().max().item<double>() < 1e-6);
    ++compared;
  }
  CHECK(compared > 14);
}

TEST_CASE("LoRA trains the same without gradient checkpointing, and in bf16 close to fp32", "[fsdp][lora]") {
  TempDir dir;
  write_tiny_checkpoint(dir.path());
  const rlcore::Batch batch = lora_batch(tiny_config().vocab_size);
  FsdpOptions recorded_options = lora_options(4);
  recorded_options.enable_gradient_checkpointing = false;
  FsdpOptions bf16_options = lora_options(4);
  bf16_options.fsdp_config.dtype = "bfloat16";
  FsdpEngine checkpointed(lora_options(4), context_for(dir.str()));
  FsdpEngine recorded(recorded_options, context_for(dir.str()));
  FsdpEngine bf16(bf16_options, context_for(dir.str()));
  for (int step = 0; step < 2; ++step) {
    checkpointed.train_step(batch, {}, pg_loss);
    recorded.train_step(batch, {}, pg_loss);
    CHECK(std::isfinite(bf16.train_step(batch, {}, pg_loss).metrics.at("grad_norm")));
  }
  for (size_t i = 0; i < checkpointed.lora().pairs().size(); ++i) {
    const auto& a = *checkpointed.lora().pairs()[i];
    const auto& b = *recorded.lora().pairs()[i];
    INFO(a.module);
    CHECK((a.a - b.a).abs().max().item<double>() < 1e-6);
    CHECK((a.b - b.b).abs().max().item<double>() < 1e-6);
    CHECK(bf16.lora().pairs()[i]->a.scalar_type() == at::kFloat);  // fp32 masters in bf16 compute
  }
  // Two updates apart in bf16: the trajectories part by bf16's rounding (8-bit mantissa): about 0.03 on
  // average, one token's log-prob up to ~0.11 (libtorch 1.13 and 2.x round differently); a broken bf16
  // path is off by whole units.
  const at::Tensor error = (bf16.forward(batch, {}).log_prob - checkpointed.forward(batch, {}).log_prob).abs();
  CHECK(error.mean().item<double>() < 0.05);
  CHECK(error.max().item<double>() < 0.2);
}
