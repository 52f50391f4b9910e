// The fused CPU loops of model_cpu_kernels.h. Each rounds to the tensor dtype
// exactly where the ATen op sequence it replaces produces a tensor.
#include "model_cpu_kernels.h"

#include <cmath>

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
      for (int64_t i = 0; i < dim; ++i) sum += static_cast<double>(static_cast<float>(xr[i])) * static_cast<float>(xr[i]);
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

}  // namespace rlcore::model::cpu
