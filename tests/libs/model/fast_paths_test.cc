// The inference fast paths of the decoder blocks (fused CPU RMSNorm and rotary
// loops, one GEMM for adjacent q/k/v and gate/up weights, no mask when nothing
// is blocked) give what the plain ATen op sequence gives; the decode kernels
// that ran are the ones this CPU's flags call for, and the ATen path, forced,
// gives the same results.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <catch2/catch.hpp>

#include "rlcore/model/cpu_kernels.h"
#include "rlcore/model/layers.h"
#include "rlcore/model/transformer.h"

#include "../../common/cpu_flags.h"

using namespace rlcore::model;
using rlcore_test::cpu_flags;

namespace {

double max_abs_diff_double(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// HF's RMSNorm as separate ATen ops.
at::Tensor reference_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor xf = x.to(at::kFloat);
  return weight * (xf * at::rsqrt(xf.pow(2).mean(-1, true) + eps)).to(x.scalar_type());
}

ModelConfig tiny_llama() {
  ModelConfig c;
  c.model_type = "llama";
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 64;
  c.tie_word_embeddings = true;
  return c;
}

// One decode step's GEMV (Linear of one row) and attention, in `dtype`.
std::pair<at::Tensor, at::Tensor> decode_kernels(at::ScalarType dtype) {
  at::manual_seed(11);
  Linear linear;
  linear.weight = at::randn({96, 64}).to(dtype);
  const at::Tensor x = at::randn({2, 1, 64}).to(dtype);
  const at::Tensor q = at::randn({2, 4, 1, 32}).to(dtype);
  const at::Tensor k = at::randn({2, 2, 9, 32}).to(dtype), v = at::randn({2, 2, 9, 32}).to(dtype);
  return {linear(x), grouped_attention(q, k, v, at::Tensor(), 0.25)};
}

// A model whose decode step qualifies for every kernel (head_dim a multiple of 16).
ModelConfig decode_llama() {
  ModelConfig c = tiny_llama();
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.head_dim = 16;
  return c;
}

// Logits of a 5-token prompt and then 3 decode steps (one token per row), in `dtype`.
at::Tensor decode_logits(at::ScalarType dtype) {
  Transformer model(decode_llama(), ModelHead::kCausalLm, at::TensorOptions().dtype(dtype));
  model.init_random(7);
  at::manual_seed(8);
  at::NoGradGuard no_grad;
  KvCache cache = model.make_cache(2, 16);
  std::vector<at::Tensor> logits = {model.forward(at::randint(0, 64, {2, 5}, at::kLong), cache)};
  for (int64_t token : {3, 17, 42}) logits.push_back(model.forward(at::full({2, 1}, token, at::kLong), cache));
  return at::cat(logits, 1);
}

const char* path_name(CpuKernelPath path) { return path == CpuKernelPath::kAvx512 ? "AVX-512" : "ATen"; }

}  // namespace

TEST_CASE("the decode kernels that run are the ones this CPU has, and the counts say so", "[model][fast]") {
  const std::set<std::string> flags = cpu_flags();
  REQUIRE_FALSE(flags.empty());
  const bool avx512 = flags.count("avx512f") && flags.count("avx512bw");
  const bool avx512_bf16 = avx512 && flags.count("avx512_bf16");
  // Which machine this ran on decides what was tested: say it in the log.
  WARN("this CPU: avx512f+bw " << (avx512 ? "yes" : "no") << ", avx512_bf16 " << (avx512_bf16 ? "yes" : "no"));
  CHECK(cpu_kernel_support().avx512 == avx512);
  CHECK(cpu_kernel_support().avx512_bf16 == avx512_bf16);
  REQUIRE_FALSE(generic_cpu_kernels());
  const CpuKernelPath fast = avx512 ? CpuKernelPath::kAvx512 : CpuKernelPath::kAten;
  CHECK(path_name(cpu_kernel_path(CpuKernel::kGemvFloat)) == std::string(path_name(fast)));
  CHECK(path_name(cpu_kernel_path(CpuKernel::kDecodeAttention)) == std::string(path_name(fast)));
  CHECK(path_name(cpu_kernel_path(CpuKernel::kGemvBFloat16)) ==
        std::string(path_name(avx512_bf16 ? CpuKernelPath::kAvx512 : CpuKernelPath::kAten)));
  CHECK_THAT(describe_cpu_kernels(), Catch::Contains(avx512 ? "fp32 GEMV AVX-512" : "fp32 GEMV ATen (no avx512f"));
  for (const auto& [dtype, gemv, fast_gemv] : {std::tuple{at::kFloat, CpuKernel::kGemvFloat, avx512},
                                               std::tuple{at::kBFloat16, CpuKernel::kGemvBFloat16, avx512_bf16}}) {
    INFO(c10::toString(dtype));
    const CpuKernelCounts gemv_before = cpu_kernel_counts(gemv);
    const CpuKernelCounts attention_before = cpu_kernel_counts(CpuKernel::kDecodeAttention);
    decode_kernels(dtype);
    const CpuKernelCounts gemv_after = cpu_kernel_counts(gemv);
    const CpuKernelCounts attention_after = cpu_kernel_counts(CpuKernel::kDecodeAttention);
    CHECK(gemv_after.avx512 - gemv_before.avx512 == (fast_gemv ? 1 : 0));
    CHECK(gemv_after.aten - gemv_before.aten == (fast_gemv ? 0 : 1));
    CHECK(attention_after.avx512 - attention_before.avx512 == (avx512 ? 1 : 0));
    CHECK(attention_after.aten - attention_before.aten == (avx512 ? 0 : 1));
  }
}

TEST_CASE("a scoped override forces the ATen path and puts the CPU's choice back", "[model][fast]") {
  REQUIRE_FALSE(generic_cpu_kernels());
  {
    ScopedGenericCpuKernels generic;
    CHECK(generic_cpu_kernels());
    for (const CpuKernel kernel : {CpuKernel::kGemvFloat, CpuKernel::kGemvBFloat16, CpuKernel::kDecodeAttention}) {
      CHECK(cpu_kernel_path(kernel) == CpuKernelPath::kAten);
    }
    CHECK_THAT(describe_cpu_kernels(), Catch::Contains("fp32 GEMV ATen (generic forced)"));
    {
      ScopedGenericCpuKernels automatic(false);
      CHECK_FALSE(generic_cpu_kernels());
    }
    CHECK(generic_cpu_kernels());
  }
  CHECK_FALSE(generic_cpu_kernels());
}

TEST_CASE("a whole decode, forced generic, matches the CPU's kernels; the counts say which ran", "[model][fast]") {
  const CpuKernelSupport support = cpu_kernel_support();
  for (const auto& [dtype, gemv, fast_gemv] :
       {std::tuple{at::kFloat, CpuKernel::kGemvFloat, support.avx512},
        std::tuple{at::kBFloat16, CpuKernel::kGemvBFloat16, support.avx512_bf16}}) {
    INFO(c10::toString(dtype));
    const CpuKernelCounts gemv_start = cpu_kernel_counts(gemv);
    const CpuKernelCounts attention_start = cpu_kernel_counts(CpuKernel::kDecodeAttention);
    const at::Tensor fast = decode_logits(dtype);
    const CpuKernelCounts gemv_fast = cpu_kernel_counts(gemv);
    const CpuKernelCounts attention_fast = cpu_kernel_counts(CpuKernel::kDecodeAttention);
    // 3 steps x 2 layers x (q/k/v + o + gate/up + down) GEMVs and one attention per layer, plus the head.
    CHECK((fast_gemv ? gemv_fast.avx512 - gemv_start.avx512 : gemv_fast.aten - gemv_start.aten) >= 3 * 2 * 4);
    CHECK((fast_gemv ? gemv_fast.aten - gemv_start.aten : gemv_fast.avx512 - gemv_start.avx512) == 0);
    CHECK((support.avx512 ? attention_fast.avx512 - attention_start.avx512
                          : attention_fast.aten - attention_start.aten) == 3 * 2);
    at::Tensor generic;
    {
      ScopedGenericCpuKernels forced;
      generic = decode_logits(dtype);
    }
    CHECK(cpu_kernel_counts(gemv).avx512 == gemv_fast.avx512);
    CHECK(cpu_kernel_counts(gemv).aten - gemv_fast.aten >= 3 * 2 * 4);
    CHECK(cpu_kernel_counts(CpuKernel::kDecodeAttention).avx512 == attention_fast.avx512);
    CHECK(cpu_kernel_counts(CpuKernel::kDecodeAttention).aten - attention_fast.aten == 3 * 2);
    REQUIRE(fast.sizes() == generic.sizes());
    // Summation order only: fp32 a few ulps through two layers; bf16 a rounding step here and there.
    const double tolerance = dtype == at::kFloat ? 1e-4 : 0.05;
    CHECK(max_abs_diff_double(fast, generic) < tolerance * std::max(1.0, fast.abs().max().item<double>()));
    // The prefill (5 tokens per row) runs the GEMMs either way: bit for bit the same.
    CHECK(fast.slice(1, 0, 5).equal(generic.slice(1, 0, 5)));
  }
}

// RLCORE_CPU_KERNELS is read once per process: the parent runs this test in a
// child with the variable set (hidden: it asserts what the variable says).
TEST_CASE("(child) RLCORE_CPU_KERNELS sets the start value", "[.cpu_kernels_env]") {
  const char* text = std::getenv("RLCORE_CPU_KERNELS");
  const std::string value = text == nullptr ? "" : text;
  if (value == "fastest") {
    CHECK_THROWS_WITH(generic_cpu_kernels(), Catch::Contains("RLCORE_CPU_KERNELS='fastest'"));
    return;
  }
  CHECK(generic_cpu_kernels() == (value == "generic"));
  const CpuKernelCounts before = cpu_kernel_counts(CpuKernel::kGemvFloat);
  decode_kernels(at::kFloat);
  const bool fast = value != "generic" && cpu_kernel_support().avx512;
  CHECK(cpu_kernel_counts(CpuKernel::kGemvFloat).avx512 - before.avx512 == (fast ? 1 : 0));
  CHECK(cpu_kernel_counts(CpuKernel::kGemvFloat).aten - before.aten == (fast ? 0 : 1));
}

TEST_CASE("RLCORE_CPU_KERNELS=generic forces the ATen path; auto leaves it to the CPU; others are refused",
          "[model][fast]") {
  std::error_code error;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", error).string();
  REQUIRE_FALSE(error);
  for (const char* value : {"generic", "auto", "fastest"}) {
    INFO(value);
    const std::string command =
        std::string("RLCORE_CPU_KERNELS=") + value + " '" + self + "' '[cpu_kernels_env]' > /dev/null 2>&1";
    CHECK(std::system(command.c_str()) == 0);
  }
}

TEST_CASE("forced generic, the decode step runs the ATen ops and agrees with the AVX-512 kernels", "[model][fast]") {
  for (const auto& [dtype, gemv] :
       {std::pair{at::kFloat, CpuKernel::kGemvFloat}, std::pair{at::kBFloat16, CpuKernel::kGemvBFloat16}}) {
    INFO(c10::toString(dtype));
    const auto [fast_y, fast_attention] = decode_kernels(dtype);
    at::Tensor generic_y, generic_attention;
    const CpuKernelCounts gemv_before = cpu_kernel_counts(gemv);
    const CpuKernelCounts attention_before = cpu_kernel_counts(CpuKernel::kDecodeAttention);
    {
      ScopedGenericCpuKernels generic;
      std::tie(generic_y, generic_attention) = decode_kernels(dtype);
    }
    CHECK_FALSE(generic_cpu_kernels());
    CHECK(cpu_kernel_counts(gemv).avx512 == gemv_before.avx512);
    CHECK(cpu_kernel_counts(gemv).aten == gemv_before.aten + 1);
    CHECK(cpu_kernel_counts(CpuKernel::kDecodeAttention).avx512 == attention_before.avx512);
    CHECK(cpu_kernel_counts(CpuKernel::kDecodeAttention).aten == attention_before.aten + 1);
    // The two paths sum in other orders: fp32 a few ulps, bf16 a rounding step.
    const double tolerance = dtype == at::kFloat ? 1e-4 : 0.1;
    CHECK(max_abs_diff_double(fast_y, generic_y) < tolerance);
    CHECK(max_abs_diff_double(fast_attention, generic_attention) < tolerance);
  }
}

TEST_CASE("the GEMV kernels equal at::linear for 1 to 8 decode rows; 9 rows take the GEMM", "[model][fast]") {
  const CpuKernelSupport support = cpu_kernel_support();
  for (const auto& [dtype, gemv, fast_gemv] :
       {std::tuple{at::kFloat, CpuKernel::kGemvFloat, support.avx512},
        std::tuple{at::kBFloat16, CpuKernel::kGemvBFloat16, support.avx512_bf16}}) {
    // 100 inputs: a masked tail in both lane widths; 37 outputs: tiles of 3 and a remainder.
    at::manual_seed(5);
    Linear linear;
    linear.weight = at::randn({37, 100}).to(dtype);
    linear.bias = at::randn({37}).to(dtype);
    for (int64_t rows = 1; rows <= 9; ++rows) {
      INFO(c10::toString(dtype) << ", " << rows << " rows");
      const at::Tensor x = at::randn({rows, 1, 100}).to(dtype);
      const CpuKernelCounts before = cpu_kernel_counts(gemv);
      const at::Tensor y = linear(x);
      const CpuKernelCounts after = cpu_kernel_counts(gemv);
      const bool kernel = fast_gemv && rows <= 8;
      CHECK(after.avx512 - before.avx512 == (kernel ? 1 : 0));
      const at::Tensor reference =
          at::linear(x.to(at::kFloat), linear.weight.to(at::kFloat), linear.bias.to(at::kFloat));
      // fp32: summation order only; bf16: the output's one rounding (8 bits of mantissa).
      const double tolerance = dtype == at::kFloat ? 1e-4 : 0.02 * std::max(1.0, reference.abs().max().item<double>());
      CHECK(max_abs_diff_double(y, reference) < tolerance);
    }
  }
}

TEST_CASE("fused RMSNorm equals the ATen op sequence", "[model]") {
  at::manual_seed(3);
  // 15 rows run on one thread, 1200 are split over the intra-op threads.
  for (const int64_t len : {5, 400}) {
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
      INFO(c10::toString(dtype) << " " << 3 * len << " rows");
      const at::Tensor x = (at::randn({3, len, 96}) * 4).to(dtype);
      const RmsNorm norm{(at::rand({96}) + 0.5).to(dtype), 1e-5};
      const at::Tensor fused = norm(x);
      CHECK(fused.scalar_type() == dtype);
      // Only the sum of squares is accumulated in another order: at most one bf16 step apart.
      const double tolerance = dtype == at::kFloat ? 1e-5 : 0.05;
      CHECK(max_abs_diff_double(fused, reference_rms_norm(x, norm.weight, norm.eps)) < tolerance);
    }
  }
}

TEST_CASE("fused rotary equals x*cos + rotate_half(x)*sin bit for bit, also on strided views", "[model]") {
  at::manual_seed(4);
  // 42 rows run on one thread, 4200 are split over the intra-op threads.
  for (const int64_t len : {7, 700}) {
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
      INFO(c10::toString(dtype) << " " << len << " positions");
      // [B, T, H, D] transposed to [B, H, T, D], as attention hands it over.
      const at::Tensor x = at::randn({2, len, 3, 16}).to(dtype).transpose(1, 2);
      const at::Tensor angles = at::randn({2, len, 16});
      const at::Tensor cos = angles.cos().to(dtype), sin = angles.sin().to(dtype);
      const at::Tensor expected = x * cos.unsqueeze(1) + rotate_half(x) * sin.unsqueeze(1);
      CHECK(apply_rotary(x, cos, sin).equal(expected));
    }
  }
}

// HF's eager attention for one query per row: repeat_kv, matmul, fp32 softmax.
at::Tensor reference_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& blocked,
                               double scaling) {
  const int64_t group = q.size(1) / k.size(1);
  const at::Tensor keys = k.repeat_interleave(group, 1), values = v.repeat_interleave(group, 1);
  at::Tensor scores = (at::matmul(q, keys.transpose(-1, -2)) * scaling).to(at::kFloat);
  if (blocked.defined()) scores = scores.masked_fill(blocked, std::numeric_limits<float>::lowest());
  const at::Tensor out = at::matmul(at::softmax(scores, -1).to(q.scalar_type()), values);
  return out.transpose(1, 2).reshape({q.size(0), 1, -1});
}

TEST_CASE("decode-step attention equals HF's eager attention over a strided cache with padding", "[model]") {
  at::manual_seed(6);
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    for (const auto& [heads, kv_heads, dim, keys] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
             {4, 2, 32, 1}, {4, 2, 32, 37}, {6, 6, 64, 100}, {8, 1, 128, 9}}) {
      INFO(c10::toString(dtype) << " heads " << heads << "/" << kv_heads << " dim " << dim << " keys " << keys);
      const double scaling = std::pow(static_cast<double>(dim), -0.5);
      const at::Tensor q = at::randn({3, heads, 1, dim}).to(dtype);
      // The used slots of a larger cache, as Attention hands them over.
      const at::Tensor cache_k = at::randn({3, kv_heads, keys + 5, dim}).to(dtype);
      const at::Tensor cache_v = at::randn({3, kv_heads, keys + 5, dim}).to(dtype);
      const at::Tensor k = cache_k.slice(2, 0, keys), v = cache_v.slice(2, 0, keys);
      // Row 1 has its first key padded (a left-padded prompt).
      at::Tensor blocked = at::zeros({3, 1, 1, keys}, at::kBool);
      if (keys > 1) blocked[1][0][0][0] = true;
      for (const at::Tensor& mask : {at::Tensor(), blocked}) {
        const at::Tensor got = grouped_attention(q, k, v, mask, scaling);
        const at::Tensor expected = reference_attention(q, k, v, mask, scaling);
        REQUIRE(got.sizes() == expected.sizes());
        CHECK(got.scalar_type() == dtype);
        // bf16: a probability may round to the neighbouring bf16 value, one step in the output.
        CHECK(max_abs_diff_double(got, expected) < (dtype == at::kFloat ? 1e-5 : 0.05));
      }
    }
  }
}

TEST_CASE("a layer gives the same outputs with adjacent and with separately allocated projections", "[model]") {
  at::manual_seed(5);
  Transformer fused(tiny_llama());
  fused.init_random(11);
  Transformer separate(tiny_llama());
  separate.load(fused.named_parameters());
  // Fresh storage for each projection: nothing is adjacent any more, so each runs alone.
  for (auto& [name, slot] : separate.parameter_slots()) *slot = slot->clone();
  const at::Tensor ids = at::randint(0, 64, {2, 9}, at::kLong);
  at::NoGradGuard no_grad;
  CHECK(max_abs_diff_double(fused.forward(ids), separate.forward(ids)) < 1e-5);
  // Training needs gradients per weight: the fused path steps aside.
  fused.set_requires_grad(true);
  at::AutoGradMode grad(true);
  const at::Tensor loss = fused.forward(ids).sum();
  loss.backward();
  CHECK(fused.layers[0].self_attn.k_proj.weight.grad().defined());
  CHECK(fused.layers[0].mlp.up_proj.weight.grad().defined());
}

TEST_CASE("a decode step over a cache without padding masks nothing; padding is still masked", "[model]") {
  Transformer model(tiny_llama());
  model.init_random(2);
  at::NoGradGuard no_grad;
  KvCache plain = model.make_cache(2, 16);
  model.forward(at::ones({2, 4}, at::kLong), plain);
  CHECK_FALSE(model.prepare(at::ones({2, 1}, at::kLong), {}, {}, &plain).blocked.defined());

  KvCache padded = model.make_cache(2, 16);
  model.forward(at::ones({2, 4}, at::kLong), padded, at::tensor({0, 1, 1, 1, 1, 1, 1, 1}, at::kLong).view({2, 4}));
  const ForwardContext step = model.prepare(at::ones({2, 1}, at::kLong), {}, {}, &padded);
  REQUIRE(step.blocked.defined());
  CHECK(step.blocked.view({2, -1})[0][0].item<bool>());        // row 0's padding slot
  CHECK_FALSE(step.blocked.view({2, -1})[1][0].item<bool>());  // row 1 has none
}

TEST_CASE("linear of a few rows (the decode GEMV) equals the exact product rounded once", "[model][fast]") {
  at::manual_seed(5);
  // Odd sizes: input not a multiple of the vector width or of the 4-vector unroll.
  for (const at::ScalarType dtype : {at::kBFloat16, at::kFloat}) {
    // bf16: up to one bf16 step for the fp32 accumulation order; fp32: a few ulps of the sum.
    const double relative = dtype == at::kBFloat16 ? std::pow(2.0, -7) : 1e-5;
    for (const auto& [rows, in, out] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {1, 768, 2048}, {1, 37, 13}, {3, 130, 67}, {4, 64, 5}, {2, 31, 1}, {1, 2048, 300}}) {
      for (bool with_bias : {false, true}) {
        INFO(c10::toString(dtype) << " " << rows << " x " << in << " -> " << out << (with_bias ? " with bias" : ""));
        Linear linear;
        linear.weight = at::randn({out, in}).to(dtype);
        if (with_bias) linear.bias = at::randn({out}).to(dtype);
        const at::Tensor x = at::randn({rows, 1, in}).to(dtype);
        const at::Tensor y = linear(x);
        REQUIRE(y.sizes() == at::IntArrayRef({rows, 1, out}));
        REQUIRE(y.scalar_type() == dtype);
        const at::Tensor exact = at::linear(x.to(at::kDouble), linear.weight.to(at::kDouble),
                                            with_bias ? linear.bias.to(at::kDouble) : at::Tensor());
        // Scale of the rounding error: the sum of the terms' magnitudes.
        const at::Tensor magnitude = at::linear(x.to(at::kDouble).abs(), linear.weight.to(at::kDouble).abs(),
                                                with_bias ? linear.bias.to(at::kDouble).abs() : at::Tensor());
        const at::Tensor step =
            dtype == at::kBFloat16 ? exact.abs().clamp_min(1e-3) * relative : magnitude.clamp_min(1e-3) * relative;
        CHECK(((y.to(at::kDouble) - exact).abs() <= step).all().item<bool>());
        // And it agrees with at::linear (oneDNN / OpenBLAS) the same way.
        CHECK(((y.to(at::kDouble) - at::linear(x, linear.weight, linear.bias).to(at::kDouble)).abs() <= 2 * step)
                  .all()
                  .item<bool>());
      }
    }
  }
}
