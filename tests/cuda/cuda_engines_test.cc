// The engines on the GPU against themselves on the CPU: infer-native's greedy
// tokens and log-probs (KV cache and SDPA on the device), rollout log-probs
// against the fsdp trainer's on the device, one fsdp optimizer step, and
// offload through the side copy stream against no offload.
#include "../plugins/infer-native/engine_testing.h"
#include "cuda_testing.h"

#include <ATen/cuda/Sleep.h>
#include <c10/core/StreamGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "train-common/copy_stream.h"
#include "fsdp_engine.h"

using namespace cuda_test;
using infer_native_test::Fixture;
using infer_native_test::test_prompts;
using rlcore::infer_native::NativeEngine;

namespace {

NativeEngine engine_on(const Fixture& fixture, const std::string& device,
                       const rlcore::infer_native::NativeEngineOptions& options = {}) {
  rlcore::ComponentContext context;
  context.model_path = fixture.dir.str();
  context.device = device;
  return NativeEngine(options, context);
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

// The policy-gradient loss over the response tokens, averaged over the global batch.
rlcore::LossOutput policy_gradient_loss(const rlcore::Batch& micro, const rlcore::ModelOutput& out,
                                        const rlcore::GlobalBatchInfo& global) {
  const at::Tensor adv = micro.tensor("advantages").to(out.log_prob.device());
  const at::Tensor mask = micro.tensor("response_mask").to(out.log_prob.device());
  const at::Tensor value = -(out.log_prob * adv * mask).sum() / global.num_tokens * global.dp_size;
  return rlcore::LossOutput{value, {{"loss", value.detach()}}};
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

TEST_CASE("infer-native's decode steps replayed as CUDA graphs give the eager steps' tokens and log-probs", "[cuda]") {
  const at::Device gpu = require_gpu();
  const Fixture fixture;
  rlcore::infer_native::NativeEngineOptions options;
  options.max_model_len = 20;  // rows run out of room after 17, 13 and 8 tokens: the batch shrinks
  options.enforce_eager = true;
  NativeEngine eager = engine_on(fixture, gpu.str(), options);
  REQUIRE(eager.decode_mode() == rlcore::infer_native::DecodeMode::kEager);
  options.enforce_eager = false;  // the default, as in verl
  NativeEngine graphed = engine_on(fixture, gpu.str(), options);
  REQUIRE(graphed.decode_mode() == rlcore::infer_native::DecodeMode::kDeviceGraph);
  CHECK(rlcore::infer_native::NativeEngineOptions().enforce_eager == false);
  rlcore::SamplingParams sampled = greedy(17);
  sampled.temperature = 1.0;
  sampled.seed = 11;
  for (rlcore::SamplingParams sampling : {greedy(17), sampled}) {
    INFO("temperature " << sampling.temperature);
    sampling.n = 2;
    const rlcore::GenerationOutput expected = eager.generate(test_prompts(), sampling);
    const rlcore::GenerationOutput actual = graphed.generate(test_prompts(), sampling);
    REQUIRE(actual.token_ids.size() == expected.token_ids.size());
    for (size_t i = 0; i < expected.token_ids.size(); ++i) {
      INFO("sequence " << i);
      CHECK(actual.token_ids[i] == expected.token_ids[i]);
      CHECK(infer_native_test::max_abs_diff(actual.logprobs[i], expected.logprobs[i]) < 1e-4);
    }
    const rlcore::infer_native::DecodeStats stats = graphed.last_decode_stats();
    CHECK(stats.graphs_recorded >= 2);  // the first batch shape, and the one after half the rows finished
    CHECK(stats.graph_replays == stats.steps - stats.graphs_recorded);
    CHECK(eager.last_decode_stats().graphs_recorded == 0);
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
  rlcore::train_fsdp::FsdpEngine trainer(rlcore::train_fsdp::FsdpOptions{}, context);
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
  rlcore::train_fsdp::FsdpOptions options;
  options.optim.lr = 1e-2;
  const auto make = [&](const std::string& device) {
    rlcore::ComponentContext context;
    context.model_path = fixture.dir.str();
    context.device = device;
    context.total_training_steps = 2;
    return std::make_unique<rlcore::train_fsdp::FsdpEngine>(options, context);
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
  const rlcore::LossFunction loss = policy_gradient_loss;
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

TEST_CASE("offload copies on the GPU run on a side stream, fenced, into pinned memory", "[cuda]") {
  const at::Device gpu = require_gpu();
  rlcore::train_common::CopyStream copies(gpu);
  REQUIRE(copies.side_stream().has_value());
  CHECK(*copies.side_stream() != c10::Stream(c10::cuda::getCurrentCUDAStream(gpu.index())));
  const at::Tensor source = at::arange(1 << 22, at::TensorOptions().dtype(at::kFloat).device(gpu));
  const at::Tensor host = copies.to_host(source);
  copies.synchronize();
  CHECK(host.is_pinned());
  CHECK(at::equal(host, source.cpu()));
  {
    // Keep the side stream busy (about a second), so that a compute stream
    // that did not wait for the copy would read the copy's memory unwritten.
    const c10::StreamGuard on_side(*copies.side_stream());
    at::cuda::sleep(int64_t{1} << 31);
  }
  rlcore::train_common::CopyFence fence;
  const at::Tensor back = copies.to_device(host, fence);
  CHECK(fence.pending());
  fence.wait();
  CHECK_FALSE(fence.pending());
  CHECK(back.device() == gpu);
  CHECK(at::equal(back, source));
}

TEST_CASE("fsdp offload on the GPU leaves every step and log-prob as without it", "[cuda]") {
  const at::Device gpu = require_gpu();
  const Fixture fixture;
  const auto make = [&](bool offload) {
    rlcore::train_fsdp::FsdpOptions options;
    options.optim.lr = 1e-2;
    options.fsdp_config.param_offload = offload;
    options.fsdp_config.optimizer_offload = offload;
    rlcore::ComponentContext context;
    context.model_path = fixture.dir.str();
    context.device = gpu.str();
    context.total_training_steps = 4;
    return std::make_unique<rlcore::train_fsdp::FsdpEngine>(options, context);
  };
  auto resident = make(false);
  auto offloaded = make(true);
  CHECK(offloaded->memory().param_bytes == 0);
  CHECK(offloaded->memory().optimizer_bytes == 0);
  CHECK(offloaded->memory().host_bytes > 0);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(11);
  const int64_t vocab = fixture.model.config().vocab_size;
  const rlcore::LossFunction loss = policy_gradient_loss;
  rlcore::ForwardOptions forward;
  forward.micro_batching.micro_batch_size = 2;
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    at::Tensor ids = at::randint(1, vocab, {4, 9}, generator, at::kLong);
    rlcore::Batch batch(4);
    batch.set("input_ids", ids);
    batch.set("attention_mask", at::ones_like(ids));
    batch.set("responses", ids.slice(1, 5).clone());
    batch.set("response_mask", at::ones({4, 4}, at::kFloat));
    batch.set("advantages", at::randn({4, 4}, generator));
    if (step == 1) offloaded->reload(rlcore::OffloadSet::kAll);  // as the hybrid engine does: copies still in flight
    const auto expected = resident->train_step(batch, forward, loss).metrics;
    const auto got = offloaded->train_step(batch, forward, loss).metrics;
    // Not bit for bit: attention's backward on the GPU may sum in any order.
    CHECK(got.at("grad_norm") == Approx(expected.at("grad_norm")).epsilon(1e-5));
    CHECK(got.at("loss") == Approx(expected.at("loss")).epsilon(1e-5));
    if (step == 1) offloaded->offload(rlcore::OffloadSet::kParams | rlcore::OffloadSet::kOptimizer);
    CHECK(offloaded->memory().param_bytes == 0);
    CHECK(offloaded->memory().optimizer_bytes == 0);
    CHECK(max_abs_diff(offloaded->forward(batch, forward).log_prob, resident->forward(batch, forward).log_prob) < 1e-4);
  }
  std::map<std::string, at::Tensor> expected;
  resident->for_each_full_parameter(
      [&](const std::string& name, const at::Tensor& full) { expected[name] = full.clone(); });
  offloaded->for_each_full_parameter([&](const std::string& name, const at::Tensor& full) {
    INFO(name);
    // AdamW moves an element with a near-zero gradient by a rounding-decided fraction of lr (see above).
    CHECK(max_abs_diff(expected.at(name), full) < 0.15 * 1e-2);
  });
}
