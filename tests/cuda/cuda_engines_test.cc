// The engines on the GPU against themselves on the CPU: infer-native's greedy
// tokens and log-probs (KV cache and SDPA on the device), rollout log-probs
// against the fsdp trainer's on the device, and one fsdp optimizer step.
#include "../plugins/infer-native/engine_testing.h"
#include "cuda_testing.h"
#include "fsdp_engine.h"

using namespace cuda_test;
using infer_native_test::Fixture;
using infer_native_test::test_prompts;
using rlcore::infer_native::NativeEngine;

namespace {

NativeEngine engine_on(const Fixture& fixture, const std::string& device) {
  rlcore::ComponentContext context;
  context.model_path = fixture.dir.str();
  context.device = device;
  return NativeEngine(rlcore::infer_native::NativeEngineOptions{}, context);
}

rlcore::SamplingParams greedy(int64_t tokens) {
  rlcore::SamplingParams sampling;
  sampling.temperature = 0;
  sampling.max_tokens = tokens;
  return sampling;
}

// One prompt + response per row, left-padded to a common prompt length.
rlcore::Batch rows_of(const rlcore::GenerationOutput& out, const std::vector<std::vector<int32_t>>& prompts) {
  int64_t prompt_len = 0;
  int64_t response_len = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    prompt_len = std::max<int64_t>(prompt_len, prompts[i].size());
    response_len = std::max<int64_t>(response_len, out.token_ids[i].size());
  }
  const auto rows = static_cast<int64_t>(prompts.size());
  at::Tensor ids = at::zeros({rows, prompt_len + response_len}, at::kLong);
  at::Tensor mask = at::zeros_like(ids);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int32_t> row = prompts[r];
    row.insert(row.end(), out.token_ids[r].begin(), out.token_ids[r].end());
    const int64_t start = prompt_len - static_cast<int64_t>(prompts[r].size());
    for (size_t t = 0; t < row.size(); ++t) {
      ids[r][start + static_cast<int64_t>(t)] = row[t];
      mask[r][start + static_cast<int64_t>(t)] = 1;
    }
  }
  rlcore::Batch batch(rows);
  batch.set("input_ids", ids);
  batch.set("attention_mask", mask);
  batch.set("responses", ids.slice(1, prompt_len).clone());
  batch.set("response_mask", mask.slice(1, prompt_len).to(at::kFloat));
  return batch;
}

}  // namespace

TEST_CASE("infer-native on the GPU generates the CPU's greedy tokens and log-probs", "[cuda]") {
  const at::Device gpu = require_gpu();
  const Fixture fixture;
  NativeEngine cpu = engine_on(fixture, "cpu");
  NativeEngine cuda = engine_on(fixture, gpu.str());
  const rlcore::GenerationOutput expected = cpu.generate(test_prompts(), greedy(12));
  const rlcore::GenerationOutput actual = cuda.generate(test_prompts(), greedy(12));
  REQUIRE(actual.token_ids.size() == expected.token_ids.size());
  for (size_t i = 0; i < expected.token_ids.size(); ++i) {
    INFO("prompt " << i);
    CHECK(actual.token_ids[i] == expected.token_ids[i]);
    CHECK(infer_native_test::max_abs_diff(actual.logprobs[i], expected.logprobs[i]) < 1e-4);
  }
}

TEST_CASE("rollout log-probs on the GPU equal the fsdp trainer's on the GPU", "[cuda]") {
  const at::Device gpu = require_gpu();
  const Fixture fixture;
  NativeEngine rollout = engine_on(fixture, gpu.str());
  rlcore::SamplingParams sampling;
  sampling.temperature = 0.8;
  sampling.max_tokens = 10;
  sampling.seed = 5;
  const rlcore::GenerationOutput out = rollout.generate(test_prompts(), sampling);

  rlcore::ComponentContext context;
  context.model_path = fixture.dir.str();
  context.device = gpu.str();
  rlcore::fsdp::FsdpEngine trainer(rlcore::fsdp::FsdpOptions{}, context);
  rlcore::ForwardOptions forward;
  forward.temperature = 0.8;
  const rlcore::Batch batch = rows_of(out, test_prompts());
  at::NoGradGuard no_grad;
  const at::Tensor log_prob = trainer.forward(batch, forward).log_prob.cpu();
  for (int64_t r = 0; r < batch.size(); ++r) {
    INFO("row " << r);
    for (size_t t = 0; t < out.logprobs[r].size(); ++t) {
      CHECK(std::abs(log_prob[r][static_cast<int64_t>(t)].item<float>() - out.logprobs[r][t]) < 1e-4);
    }
  }
}

TEST_CASE("an fsdp optimizer step on the GPU equals the CPU's", "[cuda]") {
  const at::Device gpu = require_gpu();
  const Fixture fixture;
  rlcore::fsdp::FsdpOptions options;
  options.optim.lr = 1e-2;
  const auto make = [&](const std::string& device) {
    rlcore::ComponentContext context;
    context.model_path = fixture.dir.str();
    context.device = device;
    context.total_training_steps = 2;
    return std::make_unique<rlcore::fsdp::FsdpEngine>(options, context);
  };
  auto cpu = make("cpu");
  auto cuda = make(gpu.str());
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(5);
  const int64_t vocab = fixture.model.config().vocab_size;
  at::Tensor ids = at::randint(1, vocab, {4, 9}, generator, at::kLong);
  at::Tensor mask = at::ones({4, 9}, at::kLong);
  mask[1].slice(0, 0, 2).fill_(0);
  rlcore::Batch batch(4);
  batch.set("input_ids", ids * mask);
  batch.set("attention_mask", mask);
  batch.set("responses", (ids * mask).slice(1, 5).clone());
  batch.set("response_mask", mask.slice(1, 5).to(at::kFloat));
  batch.set("advantages", at::randn({4, 4}, generator));
  const rlcore::LossFunction loss = [](const rlcore::Batch& micro, const rlcore::ModelOutput& out,
                                       const rlcore::GlobalBatchInfo& global) {
    const at::Tensor adv = micro.tensor("advantages").to(out.log_prob.device());
    const at::Tensor m = micro.tensor("response_mask").to(out.log_prob.device());
    const at::Tensor value = -(out.log_prob * adv * m).sum() / global.num_tokens * global.dp_size;
    return rlcore::LossOutput{value, {{"loss", value.detach()}}};
  };
  rlcore::ForwardOptions forward;
  const auto cpu_metrics = cpu->train_step(batch, forward, loss).metrics;
  const auto gpu_metrics = cuda->train_step(batch, forward, loss).metrics;
  CHECK(gpu_metrics.at("grad_norm") == Approx(cpu_metrics.at("grad_norm")).epsilon(1e-4));
  std::map<std::string, at::Tensor> expected;
  cpu->for_each_full_parameter([&](const std::string& name, const at::Tensor& full) { expected[name] = full.clone(); });
  int64_t compared = 0;
  cuda->for_each_full_parameter([&](const std::string& name, const at::Tensor& full) {
    INFO(name);
    CHECK(full.device() == gpu);
    // AdamW's first step moves each element by lr * g / (|g| + eps): where g is
    // near zero, rounding decides the fraction of lr, so the bound is one of lr.
    CHECK(max_abs_diff(expected.at(name), full) < 0.05 * options.optim.lr);
    ++compared;
  });
  CHECK(compared == static_cast<int64_t>(expected.size()));
}
