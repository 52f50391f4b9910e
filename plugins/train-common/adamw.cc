// AdamW as torch's single-tensor (foreach=False) implementation computes it.
#include "adamw.h"

#include <cmath>

#include <ATen/ATen.h>

namespace rlcore::train {

void adamw_update(at::Tensor& param, const at::Tensor& grad, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                  const AdamWHyper& hyper) {
  param.mul_(1.0 - hyper.lr * hyper.weight_decay);
  exp_avg.mul_(hyper.beta1).add_(grad, 1.0 - hyper.beta1);
  exp_avg_sq.mul_(hyper.beta2).addcmul_(grad, grad, 1.0 - hyper.beta2);
  const double bias_correction1 = 1.0 - std::pow(hyper.beta1, static_cast<double>(hyper.step));
  const double bias_correction2 = 1.0 - std::pow(hyper.beta2, static_cast<double>(hyper.step));
  const at::Tensor denom = (exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(hyper.eps);
  param.addcdiv_(exp_avg, denom, -hyper.lr / bias_correction1);
}

}  // namespace rlcore::train
