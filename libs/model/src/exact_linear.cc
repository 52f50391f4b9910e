// The batch-invariant linear layer (see rlcore/model/exact_linear.h).
#include "rlcore/model/exact_linear.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "cpu_dispatch.h"
#include "exact_recipe.h"
#include "rlcore/error.h"

namespace rlcore::model {
namespace {

using exact::kLanes;
// Rows of x kept hot while a thread's weight rows pass over them (64 rows of a
// 3072-wide input: 768 KB, in L2).
constexpr int64_t kRowBlock = 64;
// Weight bytes a parallel task reads at least (see gemv.cc).
constexpr int64_t kBytesPerTask = int64_t{1} << 20;

// The recipe, one output element at a time.
void portable_rows(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in, int64_t out,
                   int64_t begin, int64_t end) {
  for (int64_t m = 0; m < rows; ++m) {
    const float* xr = x + m * in;
    for (int64_t o = begin; o < end; ++o) {
      float sum = exact::dot(w + o * in, xr, in);
      if (bias != nullptr) sum = sum + bias[o];
      y[m * out + o] = sum;
    }
  }
}

#if defined(__x86_64__)
#define RLCORE_AVX512 __attribute__((target("avx512f")))
#define RLCORE_UNROLL _Pragma("GCC unroll 8")

// The same lane sum on a register: 16 -> 8 -> 4 -> 2 -> 1, each lane l with l + width.
RLCORE_AVX512 inline __attribute__((always_inline)) float sum_lanes(__m512 v) {
  const __m256 eight =
      _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  const __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
  const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  const __m128 one = _mm_add_ss(two, _mm_shuffle_ps(two, two, 1));
  return _mm_cvtss_f32(one);
}

// Rows [m, m + M) against weight rows [o, o + O): one accumulator per output,
// so each weight vector serves M products and each input vector O.
template <int M, int O>
RLCORE_AVX512 void tile(const float* x, const float* w, const float* bias, float* y, int64_t in, int64_t out, int64_t m,
                        int64_t o) {
  __m512 acc[M][O];
  RLCORE_UNROLL
  for (int r = 0; r < M; ++r) RLCORE_UNROLL
  for (int j = 0; j < O; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < in; k += kLanes) {
    const __mmask16 mask =
        k + kLanes <= in ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (in - k)) - 1);
    __m512 wv[O];
    RLCORE_UNROLL
    for (int j = 0; j < O; ++j) {
      const float* at = w + (o + j) * in + k;
      // The next tile's weights, while these are used: the prefetcher alone keeps too few streams in flight.
      _mm_prefetch(reinterpret_cast<const char*>(at + O * in), _MM_HINT_T0);
      wv[j] = _mm512_maskz_loadu_ps(mask, at);
    }
    RLCORE_UNROLL
    for (int r = 0; r < M; ++r) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + (m + r) * in + k);
      RLCORE_UNROLL
      for (int j = 0; j < O; ++j) acc[r][j] = _mm512_fmadd_ps(wv[j], xv, acc[r][j]);
    }
  }
  RLCORE_UNROLL
  for (int r = 0; r < M; ++r) RLCORE_UNROLL
  for (int j = 0; j < O; ++j) {
    float sum = sum_lanes(acc[r][j]);
    if (bias != nullptr) sum = sum + bias[o + j];
    y[(m + r) * out + o + j] = sum;
  }
}

// Outputs per tile for M rows: enough independent accumulators (M x O) to
// hide the FMA latency, few enough to stay in the 32 registers.
constexpr int outputs_per_tile(int rows) { return rows == 1 ? 8 : rows == 2 ? 6 : rows <= 4 ? 4 : 3; }

// Rows [m, m + M) against outputs [begin, end).
template <int M>
RLCORE_AVX512 void tile_outputs(const float* x, const float* w, const float* bias, float* y, int64_t in, int64_t out,
                                int64_t m, int64_t begin, int64_t end) {
  constexpr int O = outputs_per_tile(M);
  int64_t o = begin;
  for (; o + O <= end; o += O) tile<M, O>(x, w, bias, y, in, out, m, o);
  for (; o < end; ++o) tile<M, 1>(x, w, bias, y, in, out, m, o);
}

using TileOutputs = void (*)(const float*, const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t,
                             int64_t);

// Up to eight rows share each weight load: a decode step of eight sequences
// streams the weights once, as the GEMV does.
constexpr int64_t kRowsPerTile = 8;
constexpr TileOutputs kTileOutputs[kRowsPerTile + 1] = {nullptr,         tile_outputs<1>, tile_outputs<2>,
                                                        tile_outputs<3>, tile_outputs<4>, tile_outputs<5>,
                                                        tile_outputs<6>, tile_outputs<7>, tile_outputs<8>};

RLCORE_AVX512 void avx512_rows(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
                               int64_t out, int64_t begin, int64_t end) {
  // A slice's weight rows stay in L2 while the block's rows pass them (96: a multiple of every tile's outputs).
  constexpr int64_t kOutputSlice = 96;
  for (int64_t block = 0; block < rows; block += kRowBlock) {
    const int64_t block_end = std::min(rows, block + kRowBlock);
    for (int64_t slice = begin; slice < end; slice += kOutputSlice) {
      const int64_t slice_end = std::min(end, slice + kOutputSlice);
      for (int64_t m = block; m < block_end; m += kRowsPerTile) {
        kTileOutputs[std::min(kRowsPerTile, block_end - m)](x, w, bias, y, in, out, m, slice, slice_end);
      }
    }
  }
}
#endif

}  // namespace

at::Tensor exact_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const auto float_on_cpu = [](const at::Tensor& t) {
    return t.defined() && t.device().is_cpu() && t.scalar_type() == at::kFloat;
  };
  if (!float_on_cpu(x) || !float_on_cpu(weight) || weight.dim() != 2 || x.dim() < 1 || x.size(-1) != weight.size(1) ||
      (bias.defined() && (!float_on_cpu(bias) || bias.numel() != weight.size(0)))) {
    throw ValueError("exact_linear: needs float CPU tensors x [..., in], weight [out, in] and an optional bias [out]");
  }
  const at::Tensor xc = x.contiguous();
  const at::Tensor wc = weight.contiguous();
  const at::Tensor bc = bias.defined() ? bias.contiguous() : bias;
  const int64_t in = wc.size(1);
  const int64_t out = wc.size(0);
  const int64_t rows = in == 0 ? 0 : xc.numel() / in;
  std::vector<int64_t> shape = xc.sizes().vec();
  shape.back() = out;
  at::Tensor y = at::empty(shape, xc.options());
  const float* xp = xc.data_ptr<float>();
  const float* wp = wc.data_ptr<float>();
  const float* bp = bc.defined() ? bc.data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  auto rows_kernel = portable_rows;
#if defined(__x86_64__)
  if (cpu::take_avx512_path(CpuKernel::kExactLinear)) rows_kernel = avx512_rows;
#endif
  // Threads split the outputs, never an output's sum.
  const int64_t grain = std::max<int64_t>(1, kBytesPerTask / std::max<int64_t>(1, in * 4));
  at::parallel_for(0, out, grain,
                   [&](int64_t begin, int64_t end) { rows_kernel(xp, wp, bp, yp, rows, in, out, begin, end); });
  return y;
}

}  // namespace rlcore::model
