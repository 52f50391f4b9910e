// AVX512-BF16 matrix-vector products (see model_gemv.h).
#include "model_gemv.h"

#include <immintrin.h>

#include <algorithm>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

namespace rlcore::model::cpu {
namespace {

// Output rows one thread takes at least: below this, waking the pool costs more than it saves.
constexpr int64_t kRowsPerTask = 64;

bool cpu_has_bf16_dot() {
  static const bool has = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
  return has;
}

bool qualifies(const at::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == at::kBFloat16 && t.is_contiguous() &&
         !t.requires_grad();
}

// Rows [begin, end) of y [M, out] for x [M, in]: blocks of B weight rows,
// each weight vector loaded once and multiplied with every row of x. M x B
// independent accumulators keep the dot-product units busy while the weight
// streams in from memory (the decode step is bound by reading the weights).
template <int M, int B>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void gemv_rows(const uint16_t* x, int64_t in,
                                                                     const uint16_t* w, const at::BFloat16* bias,
                                                                     at::BFloat16* y, int64_t out, int64_t begin,
                                                                     int64_t end) {
  const int64_t full = in / 32 * 32;
  const __mmask32 tail_mask = static_cast<__mmask32>((uint64_t{1} << (in - full)) - 1);
  for (int64_t o = begin; o < end; o += B) {
    const int64_t block = std::min<int64_t>(B, end - o);
    __m512 acc[M][B];
    for (int m = 0; m < M; ++m)
      for (int r = 0; r < B; ++r) acc[m][r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < in; k += 32) {
      const bool tail = k == full;
      __m512bh wv[B];
      for (int r = 0; r < B; ++r) {
        // A short last block repeats its first row (in bounds); those sums are dropped.
        const uint16_t* p = w + (o + (r < block ? r : 0)) * in + k;
        // The next block's row (B rows further: B * in elements), streamed in from memory meanwhile.
        if (o + B + r < end) _mm_prefetch(reinterpret_cast<const char*>(p + B * in), _MM_HINT_T0);
        wv[r] = (__m512bh)(tail ? _mm512_maskz_loadu_epi16(tail_mask, p) : _mm512_loadu_si512(p));
      }
      for (int m = 0; m < M; ++m) {
        const uint16_t* p = x + m * in + k;
        const __m512bh xv = (__m512bh)(tail ? _mm512_maskz_loadu_epi16(tail_mask, p) : _mm512_loadu_si512(p));
        for (int r = 0; r < B; ++r) acc[m][r] = _mm512_dpbf16_ps(acc[m][r], wv[r], xv);
      }
    }
    for (int m = 0; m < M; ++m) {
      for (int64_t r = 0; r < block; ++r) {
        float sum = _mm512_reduce_add_ps(acc[m][r]);
        if (bias != nullptr) sum += static_cast<float>(bias[o + r]);
        y[m * out + o + r] = at::BFloat16(sum);  // round to nearest even
      }
    }
  }
}

using GemvRows = void (*)(const uint16_t*, int64_t, const uint16_t*, const at::BFloat16*, at::BFloat16*, int64_t,
                          int64_t, int64_t);

// Block sizes that keep M x B accumulators + B weights + 1 input in 32 registers.
constexpr int64_t kBlockFor[kGemvRows + 1] = {0, 8, 8, 4, 4};
constexpr GemvRows kKernelFor[kGemvRows + 1] = {nullptr, gemv_rows<1, 8>, gemv_rows<2, 8>, gemv_rows<3, 4>,
                                                gemv_rows<4, 4>};

}  // namespace

at::Tensor gemv_bf16(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!cpu_has_bf16_dot() || !qualifies(x) || !qualifies(weight) || weight.dim() != 2 || x.dim() < 1 ||
      x.size(-1) != weight.size(1) || (bias.defined() && (!qualifies(bias) || bias.numel() != weight.size(0)))) {
    return {};
  }
  const int64_t in = weight.size(1);
  const int64_t out = weight.size(0);
  const int64_t rows = in == 0 ? 0 : x.numel() / in;
  if (rows < 1 || rows > kGemvRows || in < 1) return {};
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = out;
  at::Tensor y = at::empty(shape, x.options());
  const auto* xp = reinterpret_cast<const uint16_t*>(x.data_ptr<at::BFloat16>());
  const auto* wp = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>());
  const at::BFloat16* bp = bias.defined() ? bias.data_ptr<at::BFloat16>() : nullptr;
  at::BFloat16* yp = y.data_ptr<at::BFloat16>();
  // Blocks never straddle two tasks: split in whole blocks.
  const int64_t block = kBlockFor[rows];
  const GemvRows kernel = kKernelFor[rows];
  const int64_t blocks = (out + block - 1) / block;
  at::parallel_for(0, blocks, kRowsPerTask / block, [&](int64_t begin, int64_t end) {
    kernel(xp, in, wp, bp, yp, out, begin * block, std::min(out, end * block));
  });
  return y;
}

}  // namespace rlcore::model::cpu
