// AVX-512 matrix-vector products for decode rows (see model_gemv.h).
#include "gemv.h"

#include "cpu_dispatch.h"

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
#define RLCORE_AVX512 __attribute__((target("avx512f,avx512bw,avx512bf16")))
// The accumulators live in registers only if the loops over them are unrolled
// (-O2 keeps the loops and spills the arrays to the stack: 3x slower).
#define RLCORE_UNROLL _Pragma("GCC unroll 8")
struct Bf16Lanes {
  using Element = at::BFloat16;
  using Vector = __m512i;
  static constexpr int64_t kLanes = 32;
  RLCORE_AVX512 static Vector load(const Element* p, __mmask32 mask) { return _mm512_maskz_loadu_epi16(mask, p); }
  RLCORE_AVX512 static __m512 dot(__m512 acc, Vector w, Vector x) {
    return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)x);
  }
};

struct F32Lanes {
  using Element = float;
  using Vector = __m512;
  static constexpr int64_t kLanes = 16;
  RLCORE_AVX512 static Vector load(const Element* p, __mmask32 mask) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>(mask), p);
  }
  RLCORE_AVX512 static __m512 dot(__m512 acc, Vector w, Vector x) { return _mm512_fmadd_ps(w, x, acc); }
};

constexpr __mmask32 kAllLanes = ~__mmask32{0};

template <typename Lanes>
RLCORE_AVX512 __mmask32 tail_mask(int64_t k, int64_t in) {
  const int64_t left = std::min<int64_t>(Lanes::kLanes, in - k);
  return static_cast<__mmask32>((uint64_t{1} << left) - 1);
}

template <typename Lanes>
RLCORE_AVX512 inline __attribute__((always_inline)) void store(typename Lanes::Element* y, __m512 total,
                                                               const typename Lanes::Element* bias, int64_t o) {
  float sum = _mm512_reduce_add_ps(total);
  if (bias != nullptr) sum += static_cast<float>(bias[o]);
  *y = typename Lanes::Element(sum);  // bf16: round to nearest even
}

// Up to four inputs the product is bound by reading the weights: each weight
// row is streamed front to back exactly once (one sequential stream per
// thread: the hardware prefetcher keeps DRAM busy) and multiplied with all M
// inputs, which stay in L1. Four accumulators per input hide the FMA latency.
template <typename Lanes, int M>
RLCORE_AVX512 void stream_rows(const typename Lanes::Element* x, int64_t in, const typename Lanes::Element* w,
                               const typename Lanes::Element* bias, typename Lanes::Element* y, int64_t out,
                               int64_t begin, int64_t end) {
  constexpr int kUnroll = 4;
  constexpr int64_t kStep = kUnroll * Lanes::kLanes;
  const int64_t unrolled = in / kStep * kStep;
  for (int64_t o = begin; o < end; ++o) {
    const typename Lanes::Element* row = w + o * in;
    __m512 acc[M][kUnroll];
    RLCORE_UNROLL
    for (int m = 0; m < M; ++m) RLCORE_UNROLL
    for (int u = 0; u < kUnroll; ++u) acc[m][u] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k < unrolled; k += kStep) {
      RLCORE_UNROLL
      for (int u = 0; u < kUnroll; ++u) {
        const auto wv = Lanes::load(row + k + u * Lanes::kLanes, kAllLanes);
        RLCORE_UNROLL
        for (int m = 0; m < M; ++m)
          acc[m][u] = Lanes::dot(acc[m][u], wv, Lanes::load(x + m * in + k + u * Lanes::kLanes, kAllLanes));
      }
    }
    for (; k < in; k += Lanes::kLanes) {
      const __mmask32 mask = tail_mask<Lanes>(k, in);
      const auto wv = Lanes::load(row + k, mask);
      RLCORE_UNROLL
      for (int m = 0; m < M; ++m) acc[m][0] = Lanes::dot(acc[m][0], wv, Lanes::load(x + m * in + k, mask));
    }
    RLCORE_UNROLL
    for (int m = 0; m < M; ++m) {
      const __m512 total = _mm512_add_ps(_mm512_add_ps(acc[m][0], acc[m][1]), _mm512_add_ps(acc[m][2], acc[m][3]));
      store<Lanes>(y + m * out + o, total, bias, o);
    }
  }
}

// Weight rows [o, o + O) against all M inputs: O x M accumulators, so each
// input vector loaded serves O products and each weight vector M. With eight
// inputs the loads come too slowly for the hardware prefetcher to keep three
// weight streams in flight, so each load asks for the same place in the next
// tile (measured, 100m model, 8 rows: 15-25 ms a step without, 10-16 ms with).
template <typename Lanes, int M, int O>
RLCORE_AVX512 void tile(const typename Lanes::Element* x, int64_t in, const typename Lanes::Element* w,
                        const typename Lanes::Element* bias, typename Lanes::Element* y, int64_t out, int64_t o) {
  __m512 acc[O][M];
  RLCORE_UNROLL
  for (int j = 0; j < O; ++j) RLCORE_UNROLL
  for (int m = 0; m < M; ++m) acc[j][m] = _mm512_setzero_ps();
  for (int64_t k = 0; k < in; k += Lanes::kLanes) {
    const __mmask32 mask = k + Lanes::kLanes <= in ? kAllLanes : tail_mask<Lanes>(k, in);
    typename Lanes::Vector wv[O];
    RLCORE_UNROLL
    for (int j = 0; j < O; ++j) {
      const typename Lanes::Element* at = w + (o + j) * in + k;
      _mm_prefetch(reinterpret_cast<const char*>(at + O * in), _MM_HINT_T0);
      wv[j] = Lanes::load(at, mask);
    }
    RLCORE_UNROLL
    for (int m = 0; m < M; ++m) {
      const auto xv = Lanes::load(x + m * in + k, mask);
      RLCORE_UNROLL
      for (int j = 0; j < O; ++j) acc[j][m] = Lanes::dot(acc[j][m], wv[j], xv);
    }
  }
  RLCORE_UNROLL
  for (int j = 0; j < O; ++j) RLCORE_UNROLL
  for (int m = 0; m < M; ++m) store<Lanes>(y + m * out + o + j, acc[j][m], bias, o + j);
}

// From five inputs on, the arithmetic outweighs the weight reads: one load per
// product (the streaming kernel's) would bind the core, so three weight rows
// at a time share each input vector (24 accumulators at eight inputs).
template <typename Lanes, int M>
RLCORE_AVX512 void tile_rows(const typename Lanes::Element* x, int64_t in, const typename Lanes::Element* w,
                             const typename Lanes::Element* bias, typename Lanes::Element* y, int64_t out,
                             int64_t begin, int64_t end) {
  constexpr int kTile = 3;
  int64_t o = begin;
  for (; o + kTile <= end; o += kTile) tile<Lanes, M, kTile>(x, in, w, bias, y, out, o);
  for (; o < end; ++o) tile<Lanes, M, 1>(x, in, w, bias, y, out, o);
}

template <typename Lanes, int M>
RLCORE_AVX512 void gemv_rows(const typename Lanes::Element* x, int64_t in, const typename Lanes::Element* w,
                             const typename Lanes::Element* bias, typename Lanes::Element* y, int64_t out,
                             int64_t begin, int64_t end) {
  if constexpr (M <= 4) {
    stream_rows<Lanes, M>(x, in, w, bias, y, out, begin, end);
  } else {
    tile_rows<Lanes, M>(x, in, w, bias, y, out, begin, end);
  }
}

template <typename Lanes>
using GemvRows = void (*)(const typename Lanes::Element*, int64_t, const typename Lanes::Element*,
                          const typename Lanes::Element*, typename Lanes::Element*, int64_t, int64_t, int64_t);

template <typename Lanes>
GemvRows<Lanes> kernel_for(int64_t rows) {
  static constexpr GemvRows<Lanes> kKernels[kGemvRows + 1] = {nullptr,
                                                              gemv_rows<Lanes, 1>,
                                                              gemv_rows<Lanes, 2>,
                                                              gemv_rows<Lanes, 3>,
                                                              gemv_rows<Lanes, 4>,
                                                              gemv_rows<Lanes, 5>,
                                                              gemv_rows<Lanes, 6>,
                                                              gemv_rows<Lanes, 7>,
                                                              gemv_rows<Lanes, 8>};
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
