// AVX-512 matrix-vector products for decode rows (see model_gemv.h).
#include "model_gemv.h"

#include "model_cpu_dispatch.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

namespace rlcore::model::cpu {
#if defined(__x86_64__)
namespace {

// Weight bytes one thread reads at least. A fork wakes a sleeping thread
// (workers run OMP_WAIT_POLICY=PASSIVE), tens of microseconds; 1 MB takes about
// that long to stream, so smaller matrices (all of the tiny model's, which sit
// in cache) stay on the calling thread.
constexpr int64_t kBytesPerTask = int64_t{1} << 20;

// One 64-byte vector of weights or inputs and its products, per dtype. Both
// carry the bf16 target attributes so that one kernel template serves both;
// the fp32 code uses AVX-512F instructions only and runs on any AVX-512 CPU.
struct Bf16Lanes {
  using Element = at::BFloat16;
  static constexpr int64_t kLanes = 32;
  __attribute__((target("avx512f,avx512bw,avx512bf16"))) static __m512 fma(__m512 acc, const Element* w,
                                                                          const Element* x, __mmask32 mask) {
    const __m512i wv = _mm512_maskz_loadu_epi16(mask, w);
    const __m512i xv = _mm512_maskz_loadu_epi16(mask, x);
    return _mm512_dpbf16_ps(acc, (__m512bh)wv, (__m512bh)xv);
  }
};

struct F32Lanes {
  using Element = float;
  static constexpr int64_t kLanes = 16;
  __attribute__((target("avx512f,avx512bw,avx512bf16"))) static __m512 fma(__m512 acc, const Element* w,
                                                                          const Element* x, __mmask32 mask) {
    const auto m16 = static_cast<__mmask16>(mask);
    return _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m16, w), _mm512_maskz_loadu_ps(m16, x), acc);
  }
};

// Output columns [begin, end) of y [M, out] for x [M, in]. Each weight row is
// streamed front to back exactly once (one sequential stream per thread: the
// hardware prefetcher keeps DRAM busy) and multiplied with all M inputs, which
// stay in L1. Four accumulators per input hide the FMA latency.
template <typename Lanes, int M>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void gemv_rows(const typename Lanes::Element* x, int64_t in,
                                                                     const typename Lanes::Element* w,
                                                                     const typename Lanes::Element* bias,
                                                                     typename Lanes::Element* y, int64_t out,
                                                                     int64_t begin, int64_t end) {
  constexpr int64_t kStep = 4 * Lanes::kLanes;
  constexpr __mmask32 kAll = ~__mmask32{0};
  const int64_t unrolled = in / kStep * kStep;
  for (int64_t o = begin; o < end; ++o) {
    const typename Lanes::Element* row = w + o * in;
    __m512 acc[M][4];
    for (int m = 0; m < M; ++m)
      for (int u = 0; u < 4; ++u) acc[m][u] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k < unrolled; k += kStep) {
      for (int m = 0; m < M; ++m)
        for (int u = 0; u < 4; ++u)
          acc[m][u] = Lanes::fma(acc[m][u], row + k + u * Lanes::kLanes, x + m * in + k + u * Lanes::kLanes, kAll);
    }
    for (; k < in; k += Lanes::kLanes) {
      const int64_t left = std::min<int64_t>(Lanes::kLanes, in - k);
      const auto mask = static_cast<__mmask32>((uint64_t{1} << left) - 1);
      for (int m = 0; m < M; ++m) acc[m][0] = Lanes::fma(acc[m][0], row + k, x + m * in + k, mask);
    }
    for (int m = 0; m < M; ++m) {
      float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[m][0], acc[m][1]),
                                                     _mm512_add_ps(acc[m][2], acc[m][3])));
      if (bias != nullptr) sum += static_cast<float>(bias[o]);
      y[m * out + o] = typename Lanes::Element(sum);  // bf16: round to nearest even
    }
  }
}

template <typename Lanes>
using GemvRows = void (*)(const typename Lanes::Element*, int64_t, const typename Lanes::Element*,
                          const typename Lanes::Element*, typename Lanes::Element*, int64_t, int64_t, int64_t);

template <typename Lanes>
GemvRows<Lanes> kernel_for(int64_t rows) {
  static constexpr GemvRows<Lanes> kKernels[kGemvRows + 1] = {nullptr, gemv_rows<Lanes, 1>, gemv_rows<Lanes, 2>,
                                                              gemv_rows<Lanes, 3>, gemv_rows<Lanes, 4>};
  return kKernels[rows];
}

bool dtype_supported(at::ScalarType dtype) { return dtype == at::kFloat || dtype == at::kBFloat16; }

bool qualifies(const at::Tensor& t, at::ScalarType dtype) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == dtype && t.is_contiguous() && !t.requires_grad();
}

template <typename Lanes>
void run(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, at::Tensor& y, int64_t rows) {
  using Element = typename Lanes::Element;
  const int64_t in = weight.size(1);
  const int64_t out = weight.size(0);
  const Element* xp = x.data_ptr<Element>();
  const Element* wp = weight.data_ptr<Element>();
  const Element* bp = bias.defined() ? bias.data_ptr<Element>() : nullptr;
  Element* yp = y.data_ptr<Element>();
  const GemvRows<Lanes> kernel = kernel_for<Lanes>(rows);
  const int64_t grain = std::max<int64_t>(1, kBytesPerTask / (in * static_cast<int64_t>(sizeof(Element))));
  at::parallel_for(0, out, grain, [&](int64_t begin, int64_t end) { kernel(xp, in, wp, bp, yp, out, begin, end); });
}

}  // namespace

at::Tensor gemv(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!x.defined()) return {};
  const at::ScalarType dtype = x.scalar_type();
  if (!dtype_supported(dtype) || !qualifies(x, dtype) || !qualifies(weight, dtype) || weight.dim() != 2 ||
      x.dim() < 2 || x.size(-1) != weight.size(1) ||
      (bias.defined() && (!qualifies(bias, dtype) || bias.numel() != weight.size(0)))) {
    return {};
  }
  const int64_t in = weight.size(1);
  const int64_t rows = in == 0 ? 0 : x.numel() / in;
  // A decode step's shape only (one token per sequence): a trainer's no-grad
  // forward of a few short rows keeps the GEMM its gradient forward uses.
  if (rows < 1 || rows > kGemvRows || x.size(-2) != 1) return {};
  if (!take_avx512_path(dtype == at::kFloat ? CpuKernel::kGemvFloat : CpuKernel::kGemvBFloat16)) return {};
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(0);
  at::Tensor y = at::empty(shape, x.options());
  if (dtype == at::kFloat) {
    run<F32Lanes>(x, weight, bias, y, rows);
  } else {
    run<Bf16Lanes>(x, weight, bias, y, rows);
  }
  return y;
}

#else  // not x86-64: the caller's at::linear

at::Tensor gemv(const at::Tensor&, const at::Tensor&, const at::Tensor&) { return {}; }

#endif

}  // namespace rlcore::model::cpu
