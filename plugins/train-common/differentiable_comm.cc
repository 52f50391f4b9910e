// Autograd functions around CommGroup's collectives.
#include "train-common/differentiable_comm.h"

#include <torch/csrc/autograd/custom_function.h>

namespace rlcore::train_common {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct AllToAllRows : torch::autograd::Function<AllToAllRows> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, std::vector<int64_t> send,
                            std::vector<int64_t> recv, int64_t group) {
    ctx->saved_data["send"] = send;
    ctx->saved_data["recv"] = recv;
    ctx->saved_data["group"] = group;
    return reinterpret_cast<const CommGroup*>(group)->all_to_all(x, send, recv);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto& group = *reinterpret_cast<const CommGroup*>(ctx->saved_data["group"].toInt());
    const std::vector<int64_t> send = ctx->saved_data["send"].toIntVector();
    const std::vector<int64_t> recv = ctx->saved_data["recv"].toIntVector();
    return {group.all_to_all(grads[0], recv, send), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor all_to_all_rows(const at::Tensor& x, const std::vector<int64_t>& send_rows,
                           const std::vector<int64_t>& recv_rows, const CommGroup& group) {
  return AllToAllRows::apply(x, send_rows, recv_rows, reinterpret_cast<int64_t>(&group));
}

}  // namespace rlcore::train_common
