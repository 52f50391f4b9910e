// The fused CPU loops of model_cpu_kernels.h. Each rounds to the tensor dtype
// exactly where the ATen op sequence it replaces produces a tensor.
#include "cpu_kernels.h"

#include "cpu_dispatch.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cmath>
#include <limits>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

namespace rlcore::model::cpu {
namespace {

// Elementwise work per parallel chunk, as ATen's own grain (32K elements).
constexpr int64_t kGrainElements = 32768;

bool eligible(const at::Tensor& t, at::ScalarType dtype) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == dtype && !t.requires_grad();
}

bool supported(at::ScalarType dtype) { return dtype == at::kFloat || dtype == at::kBFloat16; }

// The value a tensor of dtype T would store.
template <typename T>
float round_to(float v) {
  return static_cast<float>(static_cast<T>(v));
}

template <typename T>
void rms_norm_rows(const T* x, const T* w, T* out, int64_t rows, int64_t dim, float eps) {
  const int64_t grain = std::max<int64_t>(1, kGrainElements / dim);
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * dim;
      T* o = out + r * dim;
      double sum = 0;
      for (int64_t i = 0; i < dim; ++i)
        sum += static_cast<double>(static_cast<float>(xr[i])) * static_cast<float>(xr[i]);
      // mean, + eps and rsqrt each produce an fp32 tensor in HF's sequence.
      const float variance = static_cast<float>(sum / static_cast<double>(dim));
      const float inv = 1.0f / std::sqrt(variance + eps);
      for (int64_t i = 0; i < dim; ++i) {
        const float normed = round_to<T>(static_cast<float>(xr[i]) * inv);
        o[i] = static_cast<T>(static_cast<float>(w[i]) * normed);
      }
    }
  });
}

template <typename T>
void rotary_rows(const at::Tensor& x, const T* cos, const T* sin, T* out) {
  const int64_t batch = x.size(0), heads = x.size(1), len = x.size(2), dim = x.size(3), half = dim / 2;
  const int64_t sb = x.stride(0), sh = x.stride(1), st = x.stride(2);
  const T* base = x.data_ptr<T>();
  const int64_t grain = std::max<int64_t>(1, kGrainElements / dim);
  at::parallel_for(0, batch * heads * len, grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t t = row % len, h = (row / len) % heads, b = row / (len * heads);
      const T* xr = base + b * sb + h * sh + t * st;
      const T* c = cos + (b * len + t) * dim;
      const T* s = sin + (b * len + t) * dim;
      T* o = out + row * dim;
      // x * cos, rotate_half(x) * sin and their sum are each a tensor of T.
      for (int64_t i = 0; i < half; ++i) {
        const float straight = round_to<T>(static_cast<float>(xr[i]) * static_cast<float>(c[i]));
        const float turned = round_to<T>(-static_cast<float>(xr[i + half]) * static_cast<float>(s[i]));
        o[i] = static_cast<T>(straight + turned);
      }
      for (int64_t i = half; i < dim; ++i) {
        const float straight = round_to<T>(static_cast<float>(xr[i]) * static_cast<float>(c[i]));
        const float turned = round_to<T>(static_cast<float>(xr[i - half]) * static_cast<float>(s[i]));
        o[i] = static_cast<T>(straight + turned);
      }
    }
  });
}

#if defined(__x86_64__)

// 16 elements of T as fp32 lanes.
__attribute__((target("avx512f"))) inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
__attribute__((target("avx512f"))) inline __m512 load16(const at::BFloat16* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// One query head against `keys` cached positions of its kv head: scores,
// softmax and the weighted sum of values, rounding to T where the ATen
// sequence (bmm, * scaling, fp32 softmax, cast, bmm) produces a T tensor.
// `scores` is scratch space for `keys` floats; dim is a multiple of 16.
template <typename T>
__attribute__((target("avx512f"))) void attend_one_head(const T* q, const T* k, const T* v, int64_t key_stride,
                                                        const bool* blocked, int64_t keys, int64_t dim, float scaling,
                                                        float* scores, T* out) {
  float top = std::numeric_limits<float>::lowest();
  for (int64_t s = 0; s < keys; ++s) {
    const T* key = k + s * key_stride;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t d = 0; d < dim; d += 16) acc = _mm512_fmadd_ps(load16(q + d), load16(key + d), acc);
    float score = round_to<T>(round_to<T>(_mm512_reduce_add_ps(acc)) * scaling);
    if (blocked != nullptr && blocked[s]) score = std::numeric_limits<float>::lowest();
    scores[s] = score;
    top = std::max(top, score);
  }
  float total = 0;
  for (int64_t s = 0; s < keys; ++s) {
    scores[s] = std::exp(scores[s] - top);
    total += scores[s];
  }
  constexpr int kMaxDim = 256;
  __m512 acc[kMaxDim / 16];
  const int64_t vectors = dim / 16;
  for (int64_t i = 0; i < vectors; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t s = 0; s < keys; ++s) {
    const __m512 p = _mm512_set1_ps(round_to<T>(scores[s] / total));
    const T* value = v + s * key_stride;
    for (int64_t i = 0; i < vectors; ++i) acc[i] = _mm512_fmadd_ps(p, load16(value + 16 * i), acc[i]);
  }
  alignas(64) float lanes[kMaxDim];
  for (int64_t i = 0; i < vectors; ++i) _mm512_store_ps(lanes + 16 * i, acc[i]);
  for (int64_t d = 0; d < dim; ++d) out[d] = static_cast<T>(lanes[d]);
}

template <typename T>
void decode_attention_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const bool* blocked,
                            float scaling, at::Tensor& out) {
  const int64_t batch = q.size(0), heads = q.size(1), dim = q.size(3);
  const int64_t kv_heads = k.size(1), keys = k.size(2), group = heads / kv_heads;
  const T* qp = q.data_ptr<T>();
  const T* kp = k.data_ptr<T>();
  const T* vp = v.data_ptr<T>();
  T* op = out.data_ptr<T>();
  const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, keys * dim));
  at::parallel_for(0, batch * heads, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(static_cast<size_t>(keys));
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / heads, h = row % heads, g = h / group;
      attend_one_head(qp + b * q.stride(0) + h * q.stride(1), kp + b * k.stride(0) + g * k.stride(1),
                      vp + b * v.stride(0) + g * v.stride(1), k.stride(2),
                      blocked != nullptr ? blocked + b * keys : nullptr, keys, dim, scaling, scores.data(),
                      op + (b * heads + h) * dim);
    }
  });
}

#endif  // __x86_64__

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::ScalarType dtype = x.scalar_type();
  if (!supported(dtype) || !eligible(x, dtype) || !eligible(weight, dtype) || !x.is_contiguous() ||
      !weight.is_contiguous() || x.dim() < 1 || weight.dim() != 1 || weight.size(0) != x.size(-1) || x.numel() == 0) {
    return {};
  }
  at::Tensor out = at::empty_like(x);
  const int64_t dim = x.size(-1);
  const auto eps_f = static_cast<float>(eps);
  if (dtype == at::kFloat) {
    rms_norm_rows(x.data_ptr<float>(), weight.data_ptr<float>(), out.data_ptr<float>(), x.numel() / dim, dim, eps_f);
  } else {
    rms_norm_rows(x.data_ptr<at::BFloat16>(), weight.data_ptr<at::BFloat16>(), out.data_ptr<at::BFloat16>(),
                  x.numel() / dim, dim, eps_f);
  }
  return out;
}

at::Tensor rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const at::ScalarType dtype = x.scalar_type();
  if (!supported(dtype) || !eligible(x, dtype) || !eligible(cos, dtype) || !eligible(sin, dtype) || x.dim() != 4 ||
      x.stride(3) != 1 || x.size(3) % 2 != 0 || !cos.is_contiguous() || !sin.is_contiguous() ||
      cos.sizes() != at::IntArrayRef({x.size(0), x.size(2), x.size(3)}) || sin.sizes() != cos.sizes() ||
      x.numel() == 0) {
    return {};
  }
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (dtype == at::kFloat) {
    rotary_rows<float>(x, cos.data_ptr<float>(), sin.data_ptr<float>(), out.data_ptr<float>());
  } else {
    rotary_rows<at::BFloat16>(x, cos.data_ptr<at::BFloat16>(), sin.data_ptr<at::BFloat16>(),
                              out.data_ptr<at::BFloat16>());
  }
  return out;
}

at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& blocked,
                            double scaling) {
#if defined(__x86_64__)
  const at::ScalarType dtype = q.scalar_type();
  if (!supported(dtype) || !eligible(q, dtype) || !eligible(k, dtype) || !eligible(v, dtype) || q.dim() != 4 ||
      k.dim() != 4 || q.size(2) != 1 || q.size(3) % 16 != 0 || q.size(3) > 256 || k.sizes() != v.sizes() ||
      k.strides() != v.strides() || k.size(0) != q.size(0) || k.size(3) != q.size(3) || k.size(1) == 0 ||
      q.size(1) % k.size(1) != 0 || q.stride(3) != 1 || k.stride(3) != 1 || k.size(2) == 0) {
    return {};
  }
  const int64_t batch = q.size(0), keys = k.size(2);
  if (blocked.defined() && (!blocked.device().is_cpu() || blocked.scalar_type() != at::kBool ||
                            !blocked.is_contiguous() || blocked.sizes() != at::IntArrayRef({batch, 1, 1, keys}))) {
    return {};
  }
  if (!take_avx512_path(CpuKernel::kDecodeAttention)) return {};
  at::Tensor out = at::empty({batch, 1, q.size(1) * q.size(3)}, q.options());
  const bool* blocked_keys = blocked.defined() ? blocked.data_ptr<bool>() : nullptr;
  const auto scale = static_cast<float>(scaling);
  if (dtype == at::kFloat) {
    decode_attention_heads<float>(q, k, v, blocked_keys, scale, out);
  } else {
    decode_attention_heads<at::BFloat16>(q, k, v, blocked_keys, scale, out);
  }
  return out;
#else
  return {};  // the ATen ops
#endif
}

}  // namespace rlcore::model::cpu
