// The swap's copy fast paths (weight_copy.h) write exactly what copy_ writes,
// whichever vectorised loop the CPU (or a forced generic path) picks,
// and the CPU bucket (bucket_memory.h) is usable, exactly sized memory whose
// range a lazily freeing BucketMemory reuses.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include <catch2/catch.hpp>

#include "bucket_memory.h"
#include "rlcore/model/cpu_kernels.h"
#include "weight_copy.h"

#include "../../common/cpu_flags.h"

using rlcore::hybrid_engine::BucketMemory;
using rlcore::hybrid_engine::BucketRelease;
using rlcore::hybrid_engine::cast_kernel;
using rlcore::hybrid_engine::cast_kernel_calls;
using rlcore::hybrid_engine::CastKernel;
using rlcore::hybrid_engine::copy_weight;

namespace {

// Values where rounding to bf16 is delicate: ties to even both ways, values
// that round up into the next binade or to infinity, denormals, signed zeros.
at::Tensor awkward_floats() {
  const float max = std::numeric_limits<float>::max();
  const float denormal = std::numeric_limits<float>::denorm_min();
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               -1.0f,
                               max,
                               -max,
                               denormal,
                               -denormal * 3,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               1.0f + 1.0f / 256,
                               1.0f + 3.0f / 256,
                               1.0f + 1.0f / 512,
                               255.9f,
                               3.0e-39f};
  // Exact ties (low 16 bits 0x8000) with an even and an odd bf16 mantissa.
  for (uint32_t bits : {0x3F808000u, 0x3F818000u, 0x7F7F8000u, 0x007F8000u}) {
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    values.push_back(f);
  }
  at::Tensor out = at::tensor(values, at::kFloat);
  // Plus enough random values of every magnitude to cover the vectorised body.
  return at::cat({out, at::randn({4099}) * at::pow(10.0, at::randint(-30, 30, {4099}).to(at::kFloat))});
}

}  // namespace

TEST_CASE("copy_weight casts fp32 to bf16 bit for bit like copy_", "[hybrid]") {
  const at::Tensor src = awkward_floats();
  at::Tensor fast = at::empty(src.sizes(), at::kBFloat16);
  copy_weight(src, fast);
  const at::Tensor reference = at::empty(src.sizes(), at::kBFloat16).copy_(src);
  CHECK(fast.view(at::kShort).equal(reference.view(at::kShort)));
}

TEST_CASE("the fp32 -> bf16 copy runs the widest loop this CPU has; forced generic runs the plain one, same bits",
          "[hybrid]") {
  const std::set<std::string> flags = rlcore_test::cpu_flags();
  REQUIRE_FALSE(flags.empty());
  const CastKernel widest = flags.count("avx512f") ? CastKernel::kAvx512
                            : flags.count("avx2")  ? CastKernel::kAvx2
                                                   : CastKernel::kGeneric;
  WARN("this CPU's fp32 -> bf16 copy: " << (widest == CastKernel::kAvx512 ? "AVX-512"
                                            : widest == CastKernel::kAvx2 ? "AVX2"
                                                                          : "generic"));
  REQUIRE_FALSE(rlcore::model::generic_cpu_kernels());
  CHECK(cast_kernel() == widest);
  const at::Tensor src = awkward_floats();
  const at::Tensor reference = at::empty(src.sizes(), at::kBFloat16).copy_(src);
  for (const bool generic : {false, true}) {
    INFO((generic ? "forced generic" : "the CPU's choice"));
    rlcore::model::ScopedGenericCpuKernels scope(generic);
    const CastKernel expected = generic ? CastKernel::kGeneric : widest;
    CHECK(cast_kernel() == expected);
    const int64_t before = cast_kernel_calls(expected);
    at::Tensor out = at::empty(src.sizes(), at::kBFloat16);
    copy_weight(src, out);
    CHECK(cast_kernel_calls(expected) == before + 1);
    CHECK(out.view(at::kShort).equal(reference.view(at::kShort)));
  }
  // Every version the CPU can run, called directly: the AVX2 one too, which this CPU's choice skips.
  for (const auto& [kernel, flag] : {std::pair{CastKernel::kAvx512, "avx512f"}, std::pair{CastKernel::kAvx2, "avx2"},
                                     std::pair{CastKernel::kGeneric, ""}}) {
    if (*flag != '\0' && !flags.count(flag)) continue;
    INFO(static_cast<int>(kernel));
    at::Tensor out = at::empty(src.sizes(), at::kBFloat16);
    rlcore::hybrid_engine::float_to_bf16(kernel, src.data_ptr<float>(), reinterpret_cast<uint16_t*>(out.data_ptr()),
                                         src.numel());
    CHECK(out.view(at::kShort).equal(reference.view(at::kShort)));
  }
}

TEST_CASE("copy_weight maps NaN to a bf16 NaN", "[hybrid]") {
  const at::Tensor src = at::full({3}, std::numeric_limits<float>::quiet_NaN());
  at::Tensor out = at::zeros({3}, at::kBFloat16);
  copy_weight(src, out);
  CHECK(out.isnan().all().item<bool>());
}

TEST_CASE("copy_weight copies same-dtype tensors, split over threads when large", "[hybrid]") {
  for (const int64_t n : {int64_t{7}, (int64_t{1} << 21) + 5}) {
    for (const auto dtype : {at::kFloat, at::kBFloat16}) {
      const at::Tensor src = at::randn({n}).to(dtype);
      at::Tensor out = at::zeros({n}, dtype);
      copy_weight(src, out);
      CHECK(out.equal(src));
    }
  }
}

TEST_CASE("copy_weight copies row-parallel slices (contiguous rows, strided between them)", "[hybrid]") {
  const at::Tensor full = at::randn({300, 4096});
  for (int64_t rank = 0; rank < 2; ++rank) {
    const at::Tensor slice = full.narrow(1, rank * 2048, 2048);  // 614400 elements per rank
    REQUIRE_FALSE(slice.is_contiguous());
    at::Tensor bf16 = at::empty({300, 2048}, at::kBFloat16);
    copy_weight(slice, bf16);
    CHECK(bf16.equal(slice.to(at::kBFloat16)));
    at::Tensor fp32 = at::empty({300, 2048}, at::kFloat);
    copy_weight(slice, fp32);
    CHECK(fp32.equal(slice));
  }
}

TEST_CASE("copy_weight falls back to copy_ for strided sources and other dtype pairs", "[hybrid]") {
  const at::Tensor wide = at::randn({6, 8});
  const at::Tensor strided = wide.t();
  at::Tensor out = at::empty({8, 6}, at::kBFloat16);
  copy_weight(strided, out);
  CHECK(out.equal(strided.to(at::kBFloat16)));

  const at::Tensor half = at::randn({5}).to(at::kBFloat16);
  at::Tensor widened = at::empty({5}, at::kFloat);
  copy_weight(half, widened);
  CHECK(widened.equal(half.to(at::kFloat)));
}

TEST_CASE("a CPU bucket is writable memory of exactly the requested size", "[hybrid]") {
  for (const BucketRelease release : {BucketRelease::kLazyFree, BucketRelease::kUnmap}) {
    BucketMemory memory(release);
    // From the heap, and large enough for its own huge-page mapping; neither a multiple of a page.
    for (const int64_t bytes : {(int64_t{1} << 20) + 3, (int64_t{33} << 20) + 3}) {
      at::Tensor bucket = memory.allocate(bytes, at::Device(at::kCPU));
      REQUIRE(bucket.numel() == bytes);
      CHECK(bucket.scalar_type() == at::kByte);
      CHECK(reinterpret_cast<uintptr_t>(bucket.data_ptr()) % 64 == 0);
      bucket.fill_(7);
      CHECK(bucket.sum().item<int64_t>() == 7 * bytes);
      // Views outlive the handle they came from, as the rollout's adopted weights do.
      at::Tensor tail = bucket.narrow(0, bytes - 16, 16);
      bucket.reset();
      tail.fill_(1);
      CHECK(tail.sum().item<int64_t>() == 16);
    }
  }
}

TEST_CASE("a lazily freed bucket range is reused by the next swap and never shared", "[hybrid]") {
  const int64_t bytes = (int64_t{40} << 20) + 5;
  auto memory = std::make_unique<BucketMemory>(BucketRelease::kLazyFree);
  at::Tensor first = memory->allocate(bytes, at::Device(at::kCPU));
  void* const range = first.data_ptr();
  first.fill_(3);
  // While a bucket is alive, another one gets memory of its own.
  at::Tensor second = memory->allocate(bytes, at::Device(at::kCPU));
  CHECK(second.data_ptr() != range);
  second.fill_(4);
  CHECK(first.sum().item<int64_t>() == 3 * bytes);
  second.reset();
  first.reset();  // MADV_FREE: the contents are dead from here on

  // The next swap's bucket is the same range, and holds what it is given.
  at::Tensor again = memory->allocate(bytes, at::Device(at::kCPU));
  CHECK(again.data_ptr() == range);
  again.fill_(9);
  CHECK(again.sum().item<int64_t>() == 9 * bytes);

  // A bucket may outlive the memory it came from.
  at::Tensor view = again.narrow(0, 0, 64);
  again.reset();
  memory.reset();
  view.fill_(2);
  CHECK(view.sum().item<int64_t>() == 128);
}
