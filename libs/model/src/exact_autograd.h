// Private to the model library: the exact forward's layers for a forward that
// may need gradients. The forward is the exact kernel's; the backward is ATen's
// (the linear layer's from its matmuls, the norm's and the attention's by
// recomputing the ATen ops on the saved inputs). Without a gradient to track,
// each is the exact kernel alone.
#pragma once

#include <ATen/core/Tensor.h>

namespace rlcore::model {

at::Tensor exact_linear_trainable(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);
at::Tensor exact_rms_norm_trainable(const at::Tensor& x, const at::Tensor& weight, double eps);
at::Tensor exact_attention_trainable(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const at::Tensor& blocked, double scaling);

// grouped_attention's ATen ops (layers.cc): what the exact attention's backward differentiates.
at::Tensor aten_grouped_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const at::Tensor& blocked, double scaling, double softcap);

}  // namespace rlcore::model
