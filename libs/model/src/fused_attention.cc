// The one libtorch-version gate of the model code: scaled_dot_product_attention
// with grouped kv heads exists from libtorch 2.5 on.
#include "fused_attention.h"

#include <limits>

#include <ATen/ATen.h>
#include <torch/version.h>

#define RLCORE_HAVE_FUSED_GQA_ATTENTION \
  (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5))

namespace rlcore::model {
#if RLCORE_HAVE_FUSED_GQA_ATTENTION
namespace {

// The most negative finite value of `dtype` (HF's finfo(dtype).min).
double lowest_finite(at::ScalarType dtype) {
  switch (dtype) {
    case at::kBFloat16:
      return static_cast<double>(std::numeric_limits<c10::BFloat16>::lowest());
    case at::kHalf:
      return static_cast<double>(std::numeric_limits<c10::Half>::lowest());
    default:
      return std::numeric_limits<float>::lowest();
  }
}

}  // namespace
#endif

at::Tensor fused_grouped_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& blocked, double scaling) {
#if RLCORE_HAVE_FUSED_GQA_ATTENTION
  if (!q.is_cuda()) return {};
  std::optional<at::Tensor> mask;
  if (blocked.defined()) {
    // An additive mask with a finite fill, like the eager path: a fully masked
    // row (a padding query) stays uniform instead of NaN.
    mask = at::zeros(blocked.sizes(), q.options()).masked_fill_(blocked, lowest_finite(q.scalar_type()));
  }
  const at::Tensor out = at::scaled_dot_product_attention(q, k, v, mask, /*dropout_p=*/0.0, /*is_causal=*/false,
                                                          scaling, /*enable_gqa=*/true);
  return out.transpose(1, 2).reshape({q.size(0), q.size(2), -1});
#else
  (void)q, (void)k, (void)v, (void)blocked, (void)scaling;
  return {};
#endif
}

}  // namespace rlcore::model
