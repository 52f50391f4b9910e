// The batch-invariant kernels (rlcore/model/exact_linear.h, exact_forward.h):
// a row's linear output has the same bits whether it is computed alone, in a
// batch of 1..64 rows, at another place in the batch, with another thread
// count, or by the portable recipe instead of the AVX-512 kernel; a query's
// attention has the same bits in a prefill, a decode step against a cache and
// a padded batch; both stay close to the ATen ops they replace.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <cmath>

#include <catch2/catch.hpp>

#include "rlcore/error.h"
#include "rlcore/model/cpu_kernels.h"
#include "rlcore/model/exact_forward.h"
#include "rlcore/model/exact_linear.h"
#include "rlcore/model/layers.h"

using namespace rlcore::model;

namespace {

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && at::equal(a.contiguous().view(at::kInt), b.contiguous().view(at::kInt));
}

}  // namespace

TEST_CASE("exact_linear: a row's output has the same bits in any batch", "[model][exact]") {
  at::manual_seed(7);
  // An input width with a tail (773 = 48 x 16 + 5) and an output count that no tile divides.
  const int64_t in = 773, out = 37;
  const at::Tensor weight = at::randn({out, in});
  const at::Tensor bias = at::randn({out});
  const at::Tensor x = at::randn({64, in});
  const at::Tensor all = exact_linear(x, weight, bias);
  CHECK(at::allclose(all, at::linear(x, weight, bias), 1e-5, 1e-4));
  for (int64_t rows = 1; rows <= 64; ++rows) {
    INFO("rows " << rows);
    CHECK(same_bits(exact_linear(x.narrow(0, 0, rows), weight, bias), all.narrow(0, 0, rows)));
  }
  for (int64_t row = 0; row < 64; row += 7) {
    INFO("row " << row);
    CHECK(same_bits(exact_linear(x.narrow(0, row, 1), weight, bias), all.narrow(0, row, 1)));
  }
  // Elsewhere in the batch (reversed), and shaped as [batch, time, in] like a prefill.
  const at::Tensor reversed = exact_linear(x.flip(0), weight, bias);
  CHECK(same_bits(reversed.flip(0), all));
  CHECK(same_bits(exact_linear(x.view({4, 16, in}), weight, bias).view({64, out}), all));
  // Without a bias: the bias is added last, so the sums are the same.
  CHECK(same_bits(exact_linear(x, weight) + bias, all));
}

TEST_CASE("exact_linear: the same bits with any thread count and on either path", "[model][exact]") {
  at::manual_seed(11);
  const at::Tensor weight = at::randn({300, 256});
  const at::Tensor x = at::randn({9, 256});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const at::Tensor one_thread = exact_linear(x, weight);
  at::set_num_threads(2);
  const at::Tensor two_threads = exact_linear(x, weight);
  at::set_num_threads(threads);
  CHECK(same_bits(one_thread, two_threads));

  const CpuKernelCounts before = cpu_kernel_counts(CpuKernel::kExactLinear);
  const at::Tensor fast = exact_linear(x, weight);
  at::Tensor portable;
  {
    const ScopedGenericCpuKernels generic;
    portable = exact_linear(x, weight);
  }
  const CpuKernelCounts after = cpu_kernel_counts(CpuKernel::kExactLinear);
  CHECK(after.aten == before.aten + 1);  // the forced call took the portable recipe
  const bool avx512 = cpu_kernel_support().avx512;
  CHECK(after.avx512 == before.avx512 + (avx512 ? 1 : 0));
  // The AVX-512 kernel follows the portable recipe to the bit (on a CPU without it, both are portable).
  CHECK(same_bits(fast, portable));
  CHECK_THAT(describe_cpu_kernels(),
             Catch::Contains(avx512 ? "exact linear AVX-512" : "exact linear portable (no avx512f"));
}

TEST_CASE("exact_linear refuses what it does not compute", "[model][exact]") {
  const at::Tensor weight = at::randn({4, 8});
  CHECK_THROWS_AS(exact_linear(at::randn({2, 8}).to(at::kBFloat16), weight), rlcore::ValueError);
  CHECK_THROWS_AS(exact_linear(at::randn({2, 7}), weight), rlcore::ValueError);
  CHECK_THROWS_AS(exact_linear(at::randn({2, 8}), weight, at::randn({5})), rlcore::ValueError);
  CHECK(exact_linear(at::randn({0, 8}), weight).sizes() == at::IntArrayRef({0, 4}));
}

TEST_CASE("exact_attention: a query's output has the same bits in a prefill, a decode step and a padded batch",
          "[model][exact]") {
  at::manual_seed(5);
  const int64_t heads = 4, kv_heads = 2, len = 9, dim = 19;  // 19: a lane tail in every score
  const double scaling = 1.0 / std::sqrt(static_cast<double>(dim));
  const at::Tensor q = at::randn({1, heads, len, dim});
  const at::Tensor k = at::randn({1, kv_heads, len, dim});
  const at::Tensor v = at::randn({1, kv_heads, len, dim});
  const at::Tensor causal = at::ones({len, len}, at::kBool).triu(1).view({1, 1, len, len});
  const at::Tensor prefill = exact_attention(q, k, v, causal, scaling);  // [1, len, heads * dim]
  CHECK(at::allclose(prefill, grouped_attention(q, k, v, causal, scaling, 0.0), 1e-5, 1e-5));

  // Decode: query t against a 12-slot cache holding keys 0..t, the later slots hidden (and full of garbage).
  const int64_t slots = 12;
  at::Tensor cache_k = at::randn({1, kv_heads, slots, dim});
  at::Tensor cache_v = at::randn({1, kv_heads, slots, dim});
  cache_k.narrow(2, 0, len).copy_(k);
  cache_v.narrow(2, 0, len).copy_(v);
  for (int64_t t = 0; t < len; ++t) {
    INFO("decode step at position " << t);
    const at::Tensor hidden = (at::arange(slots) > t).view({1, 1, 1, slots});
    const at::Tensor step = exact_attention(q.narrow(2, t, 1), cache_k, cache_v, hidden, scaling);
    CHECK(same_bits(step.select(1, 0), prefill.select(1, t)));
  }

  // A padded batch: the sequence left-padded by 3 beside another one.
  const int64_t padded = len + 3;
  at::Tensor bq = at::randn({2, heads, padded, dim});
  at::Tensor bk = at::randn({2, kv_heads, padded, dim});
  at::Tensor bv = at::randn({2, kv_heads, padded, dim});
  bq[1].narrow(1, 3, len).copy_(q[0]);
  bk[1].narrow(1, 3, len).copy_(k[0]);
  bv[1].narrow(1, 3, len).copy_(v[0]);
  at::Tensor blocked = at::ones({padded, padded}, at::kBool).triu(1).view({1, 1, padded, padded}).repeat({2, 1, 1, 1});
  blocked[1].narrow(-1, 0, 3).fill_(true);  // the padding keys
  const at::Tensor batch = exact_attention(bq, bk, bv, blocked, scaling);
  CHECK(same_bits(batch[1].narrow(0, 3, len), prefill[0]));
  CHECK(batch[1].narrow(0, 0, 3).abs().sum().item<float>() == 0.0f);  // padding queries see no key: zeros
}

TEST_CASE("the exact forward under autograd: the no-grad forward's bits, ATen's gradients", "[model][exact]") {
  at::manual_seed(3);
  const ScopedExactForward exact;
  Linear linear;
  linear.weight = at::randn({6, 20}).requires_grad_(true);
  linear.bias = at::randn({6}).requires_grad_(true);
  Linear plain;
  plain.weight = linear.weight.detach().clone().requires_grad_(true);
  plain.bias = linear.bias.detach().clone().requires_grad_(true);
  RmsNorm norm;
  norm.weight = at::rand({20}).requires_grad_(true);
  const at::Tensor x = at::randn({3, 5, 20}).requires_grad_(true);
  const at::Tensor y = linear(norm(x));
  at::Tensor no_grad_y;
  {
    const at::NoGradGuard no_grad;
    no_grad_y = linear(norm(x));
  }
  CHECK(same_bits(y.detach(), no_grad_y));
  y.square().sum().backward();
  const at::Tensor grad_w = linear.weight.grad().clone(), grad_x = x.grad().clone();
  x.grad().zero_();
  {
    const ScopedExactForward off(false);
    plain(norm(x)).square().sum().backward();
  }
  CHECK(at::allclose(grad_w, plain.weight.grad(), 1e-4, 1e-5));
  CHECK(at::allclose(linear.bias.grad(), plain.bias.grad(), 1e-4, 1e-5));
  CHECK(at::allclose(grad_x, x.grad(), 1e-4, 1e-5));
  // Without a bias (as in Llama).
  Linear unbiased;
  unbiased.weight = linear.weight;
  const at::Tensor z = unbiased(x);
  CHECK(same_bits(z.detach(), exact_linear(x.detach(), linear.weight.detach())));
  x.grad().zero_();
  z.sum().backward();
  CHECK(at::allclose(x.grad(), linear.weight.detach().sum(0).expand({3, 5, 20}), 1e-5, 1e-5));

  // Attention: the same with a causal mask, gradients to q, k and v.
  const at::Tensor q = at::randn({1, 2, 5, 8}).requires_grad_(true);
  const at::Tensor k = at::randn({1, 1, 5, 8}).requires_grad_(true);
  const at::Tensor v = at::randn({1, 1, 5, 8}).requires_grad_(true);
  const at::Tensor causal = at::ones({5, 5}, at::kBool).triu(1).view({1, 1, 5, 5});
  const at::Tensor out = grouped_attention(q, k, v, causal, 0.35, 0.0);
  CHECK(same_bits(out.detach(), exact_attention(q.detach(), k.detach(), v.detach(), causal, 0.35)));
  out.sum().backward();
  const at::Tensor grad_q = q.grad().clone(), grad_k = k.grad().clone(), grad_v = v.grad().clone();
  q.grad().zero_(), k.grad().zero_(), v.grad().zero_();
  {
    const ScopedExactForward off(false);
    grouped_attention(q, k, v, causal, 0.35, 0.0).sum().backward();
  }
  CHECK(at::allclose(grad_q, q.grad(), 1e-4, 1e-5));
  CHECK(at::allclose(grad_k, k.grad(), 1e-4, 1e-5));
  CHECK(at::allclose(grad_v, v.grad(), 1e-4, 1e-5));
}
