// The SDK's Transformer on the GPU against the same weights on the CPU:
// logits and gradients in fp32 (the fused SDPA attention path included, with
// padding), and bf16 within bf16's precision.
#include <cmath>

#include "../plugins/infer-native/engine_testing.h"
#include "cuda_testing.h"

using namespace cuda_test;
using infer_native_test::random_model;
using infer_native_test::tiny_config;
using rlcore::model::ModelHead;
using rlcore::model::Transformer;

namespace {

struct Inputs {
  at::Tensor ids, mask, targets;
};

Inputs padded_inputs(int64_t vocab) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(11);
  Inputs in;
  in.ids = at::randint(1, vocab, {3, 12}, generator, at::kLong);
  in.mask = at::ones({3, 12}, at::kLong);
  in.mask[0].slice(0, 0, 4).fill_(0);    // left padding
  in.mask[2].slice(0, 10, 12).fill_(0);  // right padding
  in.targets = at::randint(1, vocab, {3, 12}, generator, at::kLong);
  return in;
}

Transformer on_gpu(const Transformer& cpu, const at::Device& gpu, at::ScalarType dtype) {
  Transformer model(cpu.config(), ModelHead::kCausalLm, at::TensorOptions().dtype(dtype).device(gpu));
  model.load(cpu.named_parameters());
  return model;
}

// Mean next-token NLL over the unpadded positions.
at::Tensor masked_nll(const at::Tensor& logits, const Inputs& in) {
  const at::Device device = logits.device();
  const at::Tensor logp = at::log_softmax(logits.to(at::kFloat), -1).gather(-1, in.targets.to(device).unsqueeze(-1));
  const at::Tensor mask = in.mask.to(device).to(at::kFloat);
  return -(logp.squeeze(-1) * mask).sum() / mask.sum();
}

}  // namespace

TEST_CASE("fp32 logits and gradients on the GPU equal the CPU's", "[cuda]") {
  const at::Device gpu = require_gpu();
  for (const std::string arch : {"llama", "qwen2", "qwen3"}) {
    INFO(arch);
    Transformer cpu = random_model(tiny_config(arch), 3);
    Transformer cuda = on_gpu(cpu, gpu, at::kFloat);
    const Inputs in = padded_inputs(cpu.config().vocab_size);
    cpu.set_requires_grad(true);
    cuda.set_requires_grad(true);
    const at::Tensor cpu_logits = cpu.forward(in.ids, in.mask);
    const at::Tensor gpu_logits = cuda.forward(in.ids.to(gpu), in.mask.to(gpu));
    CHECK(gpu_logits.device() == gpu);
    // Padded query rows hold no meaning; compare where the mask is set.
    const at::Tensor keep = in.mask.to(at::kBool).unsqueeze(-1);
    CHECK(max_abs_diff(cpu_logits.masked_fill(~keep, 0), gpu_logits.cpu().masked_fill(~keep, 0)) < 1e-4);
    masked_nll(cpu_logits, in).backward();
    masked_nll(gpu_logits, in).backward();
    const auto cpu_params = cpu.named_parameters();
    const auto gpu_params = cuda.named_parameters();
    for (size_t i = 0; i < cpu_params.size(); ++i) {
      INFO(cpu_params[i].first);
      const at::Tensor expected = cpu_params[i].second.grad();
      REQUIRE(expected.defined());
      const double scale = std::max(1.0, expected.abs().max().item<double>());
      CHECK(max_abs_diff(expected, gpu_params[i].second.grad()) < 1e-4 * scale);
    }
  }
}

TEST_CASE("bf16 logits on the GPU stay within bf16 precision of fp32", "[cuda]") {
  const at::Device gpu = require_gpu();
  rlcore::check_dtype_supported(gpu, at::kBFloat16, "test");
  const Transformer cpu = random_model(tiny_config("llama"), 4);
  const Transformer cuda = on_gpu(cpu, gpu, at::kBFloat16);
  const Inputs in = padded_inputs(cpu.config().vocab_size);
  at::NoGradGuard no_grad;
  const at::Tensor expected = cpu.forward(in.ids, in.mask);
  const at::Tensor actual = cuda.forward(in.ids.to(gpu), in.mask.to(gpu)).to(at::kFloat);
  const at::Tensor keep = in.mask.to(at::kBool).unsqueeze(-1);
  const double scale = expected.abs().max().item<double>();
  CHECK(max_abs_diff(expected.masked_fill(~keep, 0), actual.cpu().masked_fill(~keep, 0)) < 3e-2 * scale);
}

TEST_CASE("a packed bf16 forward (flash attention's variable-length kernel) equals the padded batch", "[cuda]") {
  const at::Device gpu = require_gpu();
  rlcore::check_dtype_supported(gpu, at::kBFloat16, "test");
  const Transformer cpu = random_model(tiny_config("llama"), 5);
  Transformer cuda = on_gpu(cpu, gpu, at::kBFloat16);
  const Inputs in = padded_inputs(cpu.config().vocab_size);
  const at::Tensor real = in.mask.to(at::kBool);
  std::vector<int64_t> lengths;
  std::vector<at::Tensor> positions;
  for (int64_t r = 0; r < in.mask.size(0); ++r) {
    lengths.push_back(in.mask[r].sum().item<int64_t>());
    positions.push_back(at::arange(lengths.back(), at::kLong));
  }
  const at::Tensor packed_ids = in.ids.masked_select(real).unsqueeze(0).to(gpu);
  cuda.set_requires_grad(true);
  const rlcore::model::ForwardContext ctx = cuda.prepare_packed(at::cat(positions).unsqueeze(0).to(gpu), lengths);
  const at::Tensor packed = cuda.apply_head(cuda.hidden_states(packed_ids, ctx)).to(at::kFloat);
  at::Tensor padded;
  {
    at::NoGradGuard no_grad;
    padded = cuda.forward(in.ids.to(gpu), in.mask.to(gpu)).to(at::kFloat);
  }
  const at::Tensor expected = padded.cpu().index({real});
  const double scale = expected.abs().max().item<double>();
  CHECK(max_abs_diff(packed.cpu().squeeze(0), expected) < 3e-2 * scale);
  // The kernel's backward reaches every parameter.
  packed.logsumexp(-1).mean().backward();
  for (const auto& [name, param] : cuda.named_parameters()) {
    INFO(name);
    REQUIRE(param.grad().defined());
    CHECK(std::isfinite(param.grad().abs().sum().item<double>()));
  }
}
