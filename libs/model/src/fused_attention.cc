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

at::Tensor flash_varlen_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const std::vector<int64_t>& offsets, int64_t longest, double scaling) {
#if RLCORE_HAVE_FUSED_GQA_ATTENTION
  const bool half = q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf;
  if (!q.is_cuda() || !half || v.size(3) != q.size(3) || q.size(0) != 1) return {};
  // The kernel's layout: [tokens, heads, D], sequences delimited by int32 offsets.
  const auto tokens_first = [](const at::Tensor& x) { return x.select(0, 0).transpose(0, 1).contiguous(); };
  const at::Tensor cumulative =
      at::tensor(std::vector<int32_t>(offsets.begin(), offsets.end()), at::TensorOptions().dtype(at::kInt))
          .to(q.device(), /*non_blocking=*/true);
  const at::Tensor out = std::get<0>(at::_flash_attention_forward(
      tokens_first(q), tokens_first(k), tokens_first(v), cumulative, cumulative, longest, longest,
      /*dropout_p=*/0.0, /*is_causal=*/true, /*return_debug_mask=*/false, scaling));
  return out.reshape({1, q.size(2), -1});
#else
  (void)q, (void)k, (void)v, (void)offsets, (void)longest, (void)scaling;
  return {};
#endif
}

}  // namespace rlcore::model
