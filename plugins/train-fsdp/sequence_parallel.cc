// Ulysses' slicing, head exchange and gather (see sequence_parallel.h).
#include "sequence_parallel.h"

#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "rlcore/columns.h"
#include "rlcore/error.h"
#include "train-common/differentiable_comm.h"

namespace rlcore::train_fsdp {

UlyssesParallel::UlyssesParallel(const CommGroup& group, const model::ModelConfig& config) : group_(group) {
  const std::string key = "ulysses_sequence_parallel_size = " + std::to_string(group.size());
  if (config.is_moe()) {
    throw ConfigError("fsdp: " + key + ": " + config.model_type +
                      " is a mixture of experts, whose router losses and routing replay span every token; "
                      "sequence parallelism takes dense models");
  }
  if (config.num_attention_heads % group.size() != 0 || config.num_key_value_heads % group.size() != 0) {
    throw ConfigError("fsdp: " + key + " must divide the model's " + std::to_string(config.num_attention_heads) +
                      " attention heads and " + std::to_string(config.num_key_value_heads) +
                      " key-value heads (each rank attends with its share of them)");
  }
  exchange_.heads_to_sequence = [this](const at::Tensor& x) { return heads_to_sequence(x); };
  exchange_.sequence_to_heads = [this](const at::Tensor& y) { return sequence_to_heads(y); };
}

void UlyssesParallel::slice(train_common::MicroBatch& micro, const model::Transformer& model) const {
  if (!micro.packing) return;
  train_common::Packing& packing = *micro.packing;
  const int64_t n = size();
  const int64_t tokens = micro.input_ids.size(1);
  const int64_t padded = (tokens + n - 1) / n * n;
  std::vector<int64_t> lengths = packing.lengths;
  at::Tensor ids = micro.input_ids;
  at::Tensor positions = micro.position_ids;
  if (padded > tokens) {
    const int64_t pad = padded - tokens;
    lengths.push_back(pad);
    ids = at::cat({ids, at::zeros({1, pad}, ids.options())}, 1);
    positions = at::cat({positions, at::arange(pad, positions.options()).unsqueeze(0)}, 1);
  }
  const int64_t share = padded / n;
  const int64_t begin = group_.rank() * share;
  micro.input_ids = ids.slice(1, begin, begin + share);
  micro.position_ids = positions.slice(1, begin, begin + share);
  micro.attention_mask = at::ones_like(micro.input_ids);
  micro.ctx = model.prepare_packed(micro.position_ids, lengths);
  micro.ctx.sequence_parallel = &exchange_;
  // Predictor slots increase, so each rank's predictions are one run of them.
  const at::Tensor bounds = at::arange(n + 1, at::kLong) * share;
  const at::Tensor cuts = at::searchsorted(packing.predictor_index.cpu().contiguous(), bounds).contiguous();
  const int64_t* cut = cuts.data_ptr<int64_t>();
  packing.rank_predictions.clear();
  for (int64_t r = 0; r < n; ++r) packing.rank_predictions.push_back(cut[r + 1] - cut[r]);
  packing.slot_begin = begin;
  packing.prediction_begin = cut[group_.rank()];
  packing.prediction_end = cut[group_.rank() + 1];
}

at::Tensor UlyssesParallel::heads_to_sequence(const at::Tensor& x) const {
  // [1, H, T / N, D]: rank j gets heads [j H / N, (j + 1) H / N) of every rank's slice.
  const int64_t n = size();
  const int64_t heads = x.size(1);
  const int64_t local_len = x.size(2);
  const std::vector<int64_t> one_each(static_cast<size_t>(n), 1);
  const at::Tensor received = train_common::all_to_all_rows(x.reshape({n, -1}), one_each, one_each, group_);
  return received.view({n, heads / n, local_len, x.size(3)})
      .transpose(0, 1)
      .reshape({1, heads / n, n * local_len, x.size(3)});
}

at::Tensor UlyssesParallel::sequence_to_heads(const at::Tensor& y) const {
  // [1, T, H / N * Dv]: rank r gets its slice's tokens of every rank's heads, in head order.
  const int64_t n = size();
  const int64_t local_len = y.size(1) / n;
  const int64_t width = y.size(2);
  const std::vector<int64_t> one_each(static_cast<size_t>(n), 1);
  const at::Tensor received = train_common::all_to_all_rows(y.reshape({n, -1}), one_each, one_each, group_);
  return received.view({n, local_len, width}).transpose(0, 1).reshape({1, local_len, n * width});
}

at::Tensor UlyssesParallel::gather_predictions(const train_common::Packing& packing, const at::Tensor& local) const {
  const int64_t n = size();
  // Every rank sends its predictions to every rank: an all-gather of unequal parts.
  const std::vector<at::Tensor> copies(static_cast<size_t>(n), local);
  const std::vector<int64_t> send(static_cast<size_t>(n), local.size(0));
  return train_common::all_to_all_rows(at::cat(copies, 0), send, packing.rank_predictions, group_);
}

void UlyssesParallel::check_same_rows(const Batch& batch, const std::string& engine) const {
  const at::Tensor& mask = batch.tensor(columns::kAttentionMask);
  // Rows, tokens and a checksum of where they sit, on the device the group's backend reduces on.
  const at::Tensor mine =
      at::stack({at::scalar_tensor(static_cast<double>(batch.size()), at::kDouble),
                 mask.sum().to(at::kCPU, at::kDouble), mask.to(at::kDouble).cumsum(1).sum().to(at::kCPU)})
          .to(mask.device());
  const std::vector<at::Tensor> all = group_.all_gather(mine);
  for (size_t r = 0; r < all.size(); ++r) {
    if (!at::equal(all[r].cpu(), all.front().cpu())) {
      throw ValueError(engine + ": the ranks of a sequence-parallel group must hold the same rows, but rank " +
                       std::to_string(r) + " of group '" + group_.name() + "' holds " +
                       std::to_string(all[r][0].item<int64_t>()) + " rows of " +
                       std::to_string(all[r][1].item<int64_t>()) + " tokens and rank 0 " +
                       std::to_string(all.front()[0].item<int64_t>()) + " rows of " +
                       std::to_string(all.front()[1].item<int64_t>()) + " tokens");
    }
  }
}

std::unique_ptr<UlyssesParallel> make_ulysses(int64_t size, bool use_remove_padding, const CommContext* comm,
                                              const model::ModelConfig& config) {
  if (size == 1) return nullptr;
  const std::string key = "fsdp: ulysses_sequence_parallel_size = " + std::to_string(size);
  if (!use_remove_padding) {
    throw ConfigError(key + " needs use_remove_padding: true (it splits packed sequences, as verl's does)");
  }
  if (comm == nullptr || !comm->has_group("sp") || comm->group("sp").size() != size) {
    throw ConfigError(key +
                      " needs the worker pool's 'sp' mesh dimension of that size (the trainer makes it from "
                      "actor_rollout_ref.actor.ulysses_sequence_parallel_size), but the pool has " +
                      (comm != nullptr && comm->has_group("sp")
                           ? "one of size " + std::to_string(comm->group("sp").size())
                           : std::string("none")));
  }
  return std::make_unique<UlyssesParallel>(comm->group("sp"), config);
}

}  // namespace rlcore::train_fsdp
