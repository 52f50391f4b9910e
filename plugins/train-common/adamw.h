// torch.optim.AdamW's update (decoupled weight decay, bias correction) on one
// flat fp32 shard, so a sharded step equals the unsharded one element-wise.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace rlcore::train_common {

struct AdamWHyper {
  double lr = 0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  int64_t step = 1;  // 1-based count of updates including this one
  // The gradient is used times this (global-norm clipping), as if grad.mul_(grad_scale) had run first.
  double grad_scale = 1.0;
};

void adamw_update(at::Tensor& param, const at::Tensor& grad, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                  const AdamWHyper& hyper);

}  // namespace rlcore::train_common
