// The batch-invariant linear layer (rlcore/model/exact_linear.h): a row's
// output has the same bits whether it is computed alone, in a batch of 1..64
// rows, at another place in the batch, with another thread count, or by the
// portable recipe instead of the AVX-512 kernel; and it is a linear layer
// (close to at::linear).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <catch2/catch.hpp>

#include "rlcore/error.h"
#include "rlcore/model/cpu_kernels.h"
#include "rlcore/model/exact_linear.h"

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
