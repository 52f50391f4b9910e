// What the fsdp LoRA tests share: a small batch, an engine context and LoRA
// options over the tiny checkpoint of fsdp_testing.h.
#pragma once

#include "fsdp_engine_testing.h"

#include "fsdp_engine.h"
#include "fsdp_options.h"

namespace lora_test {

using rlcore::train_fsdp::FsdpEngine;
using rlcore::train_fsdp::FsdpOptions;

inline rlcore::Batch lora_batch(int64_t vocab) {
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

inline rlcore::ComponentContext context_for(const std::string& model) { return fsdp_test::context_for(model, 8); }

inline FsdpOptions lora_options(int64_t rank, std::vector<std::string> targets = {"all-linear"}) {
  FsdpOptions options;
  options.optim.lr = 1e-2;
  options.lora.lora_rank = rank;
  options.lora.lora_alpha = 16;
  options.lora.target_modules = std::move(targets);
  return options;
}

// The frozen base weights (one rank: its shards are the whole tensors).
inline rlcore::NamedTensors base_parameters(const FsdpEngine& engine) {
  rlcore::NamedTensors out;
  for (const rlcore::ParameterShard& shard : engine.parameter_shards()) {
    REQUIRE(shard.local.numel() == c10::multiply_integers(shard.shape));
    out.emplace_back(shard.name, shard.local.view(shard.shape).clone());
  }
  return out;
}

inline rlcore::NamedTensors named_full_parameters(FsdpEngine& engine) {
  rlcore::NamedTensors out;
  engine.for_each_full_parameter(
      [&](const std::string& name, const at::Tensor& full) { out.emplace_back(name, full.clone()); });
  return out;
}

}  // namespace lora_test
