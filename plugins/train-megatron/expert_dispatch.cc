// The all-to-all token dispatch of expert parallelism.
#include "expert_dispatch.h"

#include <ATen/ATen.h>

#include "train-common/differentiable_comm.h"

namespace rlcore::train_megatron {
namespace {

std::vector<int64_t> as_vector(const at::Tensor& counts) {
  const at::Tensor cpu = counts.to(at::kCPU, at::kLong).contiguous();
  return std::vector<int64_t>(cpu.data_ptr<int64_t>(), cpu.data_ptr<int64_t>() + cpu.numel());
}

// The received rows through the local experts, each row by its expert, in the received order.
at::Tensor run_local_experts(const model::SparseMoe& moe, const at::Tensor& rows, const at::Tensor& local_expert) {
  const int64_t local = static_cast<int64_t>(moe.experts.size());
  const at::Tensor order = std::get<1>(local_expert.sort(/*stable=*/c10::optional<bool>(true), /*dim=*/0));
  const std::vector<int64_t> counts = as_vector(at::bincount(local_expert, {}, local));
  const at::Tensor sorted_rows = rows.index_select(0, order);
  std::vector<at::Tensor> outputs;
  int64_t start = 0;
  for (int64_t e = 0; e < local; ++e) {
    const int64_t n = counts[static_cast<size_t>(e)];
    if (n == 0) continue;
    outputs.push_back(moe.experts[static_cast<size_t>(e)](sorted_rows.narrow(0, start, n)));
    start += n;
  }
  if (outputs.empty()) return rows * 0;  // still on the graph: every rank then runs the backward all-to-all
  const at::Tensor sorted_out = at::cat(outputs, 0);
  // Back to the received order: out[order[i]] = sorted_out[i].
  const at::Tensor inverse = at::empty_like(order).scatter_(0, order, at::arange(order.numel(), order.options()));
  return sorted_out.index_select(0, inverse);
}

}  // namespace

at::Tensor dispatch_to_experts(const model::SparseMoe& moe, const at::Tensor& tokens, const model::Routed& routed,
                               const CommGroup& ep) {
  const int64_t local = static_cast<int64_t>(moe.experts.size());
  const int64_t k = routed.chosen.size(1);
  // (token, choice) pairs sorted by global expert: experts are contiguous per rank,
  // so this also groups the pairs by destination rank, in rank order.
  const at::Tensor flat_chosen = routed.chosen.reshape(-1);
  const at::Tensor order = std::get<1>(flat_chosen.sort(/*stable=*/c10::optional<bool>(true), /*dim=*/0));
  const at::Tensor expert_of = flat_chosen.index_select(0, order);
  const at::Tensor token_of = order.div(k, "floor");
  const at::Tensor weight_of = routed.weights.reshape(-1).index_select(0, order);

  const at::Tensor send_counts = at::bincount(expert_of.div(local, "floor"), {}, ep.size()).to(at::kCPU, at::kLong);
  const std::vector<int64_t> ones(static_cast<size_t>(ep.size()), 1);
  const std::vector<int64_t> send = as_vector(send_counts);
  const std::vector<int64_t> recv = as_vector(ep.all_to_all(send_counts, ones, ones));

  const at::Tensor received = train_common::all_to_all_rows(tokens.index_select(0, token_of), send, recv, ep);
  const at::Tensor received_expert = ep.all_to_all(expert_of, send, recv);
  const at::Tensor local_expert = received_expert - ep.rank() * local;
  const at::Tensor processed = run_local_experts(moe, received, local_expert);
  const at::Tensor returned = train_common::all_to_all_rows(processed, recv, send, ep);

  // As apply_experts: weight, cast, and sum each token's experts in expert order.
  const at::Tensor weighted = (returned * weight_of.unsqueeze(-1)).to(tokens.scalar_type());
  return at::zeros_like(tokens).index_add(0, token_of, weighted);
}

}  // namespace rlcore::train_megatron
