// The exact forward's layers under autograd (see exact_autograd.h).
#include "exact_autograd.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/autograd.h>

#include "cpu_kernels.h"
#include "rlcore/model/exact_forward.h"
#include "rlcore/model/exact_linear.h"

namespace rlcore::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool tracks_gradient(std::initializer_list<at::Tensor> tensors) {
  if (!at::GradMode::is_enabled()) return false;
  for (const at::Tensor& t : tensors) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

// The gradients of `reference` (ATen ops) at the saved inputs, for the output's gradient `grad`.
template <typename Reference>
variable_list recomputed_gradients(const variable_list& saved, const at::Tensor& grad, Reference reference) {
  variable_list inputs;
  for (const at::Tensor& t : saved) inputs.push_back(t.detach().requires_grad_(t.is_floating_point()));
  at::Tensor output;
  {
    const at::AutoGradMode enabled(true);
    output = reference(inputs);
  }
  variable_list wrt;
  for (const at::Tensor& t : inputs) {
    if (t.requires_grad()) wrt.push_back(t);
  }
  variable_list found = torch::autograd::grad({output}, wrt, {grad}, /*retain_graph=*/false, /*create_graph=*/false,
                                              /*allow_unused=*/true);
  variable_list gradients;
  size_t next = 0;
  for (const at::Tensor& t : inputs) gradients.push_back(t.requires_grad() ? found[next++] : at::Tensor());
  return gradients;
}

// x W^T (+ b). Autograd takes no undefined tensor as an input: without a bias, `bias` is not passed.
template <bool kBias>
struct ExactLinear : torch::autograd::Function<ExactLinear<kBias>> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias = {}) {
    ctx->save_for_backward({x, weight});
    return exact_linear(x, weight, bias);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor grad = grads[0];
    const at::Tensor rows = grad.reshape({-1, weight.size(0)});
    variable_list gradients = {at::matmul(grad, weight), rows.t().mm(x.reshape({-1, weight.size(1)}))};
    if (kBias) gradients.push_back(rows.sum(0));
    return gradients;
  }
};

struct ExactRmsNorm : torch::autograd::Function<ExactRmsNorm> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, double eps) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["eps"] = eps;
    return cpu::rms_norm(x.contiguous().detach(), weight.contiguous().detach(), eps);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const double eps = ctx->saved_data["eps"].toDouble();
    variable_list gradients =
        recomputed_gradients(ctx->get_saved_variables(), grads[0], [eps](const variable_list& in) {
          const at::Tensor variance = in[0].pow(2).mean(-1, /*keepdim=*/true);
          return in[1] * (in[0] * at::rsqrt(variance + eps));
        });
    gradients.push_back(at::Tensor());  // eps
    return gradients;
  }
};

struct ExactAttention : torch::autograd::Function<ExactAttention> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& blocked, double scaling) {
    ctx->save_for_backward({q, k, v, blocked});
    ctx->saved_data["scaling"] = scaling;
    return exact_attention(q, k, v, blocked, scaling);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const double scaling = ctx->saved_data["scaling"].toDouble();
    variable_list saved = ctx->get_saved_variables();
    const at::Tensor blocked = saved[3];
    saved.pop_back();
    variable_list gradients = recomputed_gradients(saved, grads[0], [&](const variable_list& in) {
      return aten_grouped_attention(in[0], in[1], in[2], blocked, scaling, 0.0);
    });
    gradients.push_back(at::Tensor());  // blocked
    gradients.push_back(at::Tensor());  // scaling
    return gradients;
  }
};

}  // namespace

at::Tensor exact_linear_trainable(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!tracks_gradient({x, weight, bias})) return exact_linear(x, weight, bias);
  return bias.defined() ? ExactLinear<true>::apply(x, weight, bias) : ExactLinear<false>::apply(x, weight);
}

at::Tensor exact_rms_norm_trainable(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (!tracks_gradient({x, weight})) return cpu::rms_norm(x.contiguous().detach(), weight.contiguous().detach(), eps);
  return ExactRmsNorm::apply(x, weight, eps);
}

at::Tensor exact_attention_trainable(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const at::Tensor& blocked, double scaling) {
  if (!tracks_gradient({q, k, v})) return exact_attention(q, k, v, blocked, scaling);
  // An undefined mask (nothing hidden) goes in as an all-false one: autograd takes no undefined input.
  const at::Tensor mask = blocked.defined() ? blocked : at::zeros({1, 1, q.size(2), k.size(2)}, at::kBool);
  return ExactAttention::apply(q, k, v, mask, scaling);
}

}  // namespace rlcore::model
