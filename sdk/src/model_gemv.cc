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
constexpr int64_t kBlock = 4;  // weight rows sharing each load of x

bool cpu_has_bf16_dot() {
  static const bool has = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
  return has;
}

bool qualifies(const at::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == at::kBFloat16 && t.is_contiguous() &&
         !t.requires_grad();
}

// Rows [begin, end) of y [rows, out] for x [rows, in]: blocks of kBlock weight
// rows, each weight vector loaded once and multiplied with every row of x.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void gemv_rows(const uint16_t* x, int64_t rows, int64_t in,
                                                                     const uint16_t* w, const at::BFloat16* bias,
                                                                     at::BFloat16* y, int64_t out, int64_t begin,
                                                                     int64_t end) {
  const int64_t full = in / 32 * 32;
  const __mmask32 tail_mask = static_cast<__mmask32>((uint64_t{1} << (in - full)) - 1);
  for (int64_t o = begin; o < end; o += kBlock) {
    const int64_t block = std::min(kBlock, end - o);
    __m512 acc[kGemvRows][kBlock];
    for (int64_t m = 0; m < rows; ++m)
      for (int64_t r = 0; r < kBlock; ++r) acc[m][r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < in; k += 32) {
      const bool tail = k == full;
      __m512bh wv[kBlock];
      for (int64_t r = 0; r < block; ++r) {
        const uint16_t* p = w + (o + r) * in + k;
        wv[r] = (__m512bh)(tail ? _mm512_maskz_loadu_epi16(tail_mask, p) : _mm512_loadu_si512(p));
      }
      for (int64_t m = 0; m < rows; ++m) {
        const uint16_t* p = x + m * in + k;
        const __m512bh xv = (__m512bh)(tail ? _mm512_maskz_loadu_epi16(tail_mask, p) : _mm512_loadu_si512(p));
        for (int64_t r = 0; r < block; ++r) acc[m][r] = _mm512_dpbf16_ps(acc[m][r], wv[r], xv);
      }
    }
    for (int64_t m = 0; m < rows; ++m) {
      for (int64_t r = 0; r < block; ++r) {
        float sum = _mm512_reduce_add_ps(acc[m][r]);
        if (bias != nullptr) sum += static_cast<float>(bias[o + r]);
        y[m * out + o + r] = at::BFloat16(sum);  // round to nearest even
      }
    }
  }
}

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
  // Blocks never straddle two tasks: split in multiples of kBlock rows.
  const int64_t blocks = (out + kBlock - 1) / kBlock;
  at::parallel_for(0, blocks, kRowsPerTask / kBlock, [&](int64_t begin, int64_t end) {
    gemv_rows(xp, rows, in, wp, bp, yp, out, begin * kBlock, std::min(out, end * kBlock));
  });
  return y;
}

}  // namespace rlcore::model::cpu
