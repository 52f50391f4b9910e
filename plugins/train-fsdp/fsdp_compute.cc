// FsdpEngine's forward and train_step. The schedule is unit-major: each unit
// is gathered once per pass and runs every micro-batch before it is freed, so
// the number of collectives does not depend on how rows are cut (ranks may
// hold different micro-batch counts). Training keeps each unit's input
// (activation checkpointing at unit boundaries) and recomputes the unit with
// gradients in the backward pass, where the unit is gathered again.
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include "train-common/adamw.h"
#include "fsdp_engine.h"
#include "fsdp_engine_internal.h"
#include "train-common/micro_batches.h"
#include "rlcore/error.h"
#include "rlcore/rl_functional.h"

namespace rlcore::train_fsdp {
namespace {

// Sum and count of each loss metric over this rank's micro-batches.
class MetricMeans {
 public:
  void add(const std::map<std::string, at::Tensor>& metrics) {
    for (const auto& [name, value] : metrics) {
      auto& entry = sums_[name];
      entry.first += value.detach().to(at::kDouble).item<double>();
      entry.second += 1;
    }
  }

  // Mean over micro-batches, then over dp ranks. Every rank must report the same names.
  std::map<std::string, double> dp_mean(const DpComm& dp) const {
    std::hash<std::string> hasher;
    double name_hash = 0;
    for (const auto& entry : sums_) name_hash += static_cast<double>(hasher(entry.first) % 1000003);
    std::vector<double> values = {name_hash, name_hash * name_hash};
    for (const auto& entry : sums_) values.push_back(entry.second.first / entry.second.second);
    at::Tensor reduced = at::tensor(values, at::kDouble);
    dp.all_reduce_sum(reduced);
    const double n = static_cast<double>(dp.size());
    const double mean_hash = reduced[0].item<double>() / n;
    if (std::abs(reduced[1].item<double>() / n - mean_hash * mean_hash) > 1e-6 * (1 + mean_hash * mean_hash))
      throw ValueError("fsdp: the loss function returned different metric names on different dp ranks");
    std::map<std::string, double> out;
    int64_t i = 2;
    for (const auto& entry : sums_) out[entry.first] = reduced[i++].item<double>() / n;
    return out;
  }

 private:
  std::map<std::string, std::pair<double, int64_t>> sums_;
};

at::Tensor concat_or_empty(const std::vector<at::Tensor>& parts, int64_t response_len, const at::Device& device) {
  if (parts.empty() || !parts.front().defined()) {
    return parts.empty() ? at::zeros({0, response_len}, at::TensorOptions().dtype(at::kFloat).device(device))
                         : at::Tensor();
  }
  return at::cat(parts, 0);
}

}  // namespace

double FsdpEngine::stashed_bytes(const std::vector<LayerStash>& stash) {
  double bytes = 0;
  for (const LayerStash& layer : stash) {
    for (const auto* tensors : {&layer.inputs, &layer.outputs})
      for (const at::Tensor& t : *tensors) bytes += static_cast<double>(t.numel() * t.element_size());
  }
  return bytes;
}

std::vector<at::Tensor> FsdpEngine::forward_trunk(std::vector<MicroBatch>& micro, std::vector<LayerStash>* stash) {
  // Each layer's graph starts at its own detached input, so the backward can
  // run (and free) one layer at a time, as with checkpointing.
  const bool record = stash != nullptr && !options_.enable_gradient_checkpointing;
  at::AutoGradMode grad_mode(record);
  std::vector<at::Tensor> hidden(micro.size());
  {
    at::NoGradGuard no_grad;
    GatheredUnit embed(*this, embed_unit(), false);
    for (size_t m = 0; m < micro.size(); ++m) hidden[m] = skeleton_.embed(micro[m].input_ids);
  }
  for (int64_t layer = 0; layer < config_.num_hidden_layers; ++layer) {
    auto unit = std::make_unique<GatheredUnit>(*this, layer_unit(layer), record && base_trains());
    for (size_t m = 0; m < micro.size(); ++m) {
      const at::Tensor x = record ? hidden[m].detach().requires_grad_(true) : hidden[m];
      hidden[m] = skeleton_.layers[layer](x, micro[m].ctx, layer);
      if (!stash) continue;
      (*stash)[layer].inputs.push_back(x);
      if (record) (*stash)[layer].outputs.push_back(hidden[m]);
    }
    if (record) (*stash)[layer].unit = std::move(unit);
  }
  return hidden;
}

ModelOutput FsdpEngine::head_outputs(const MicroBatch& micro, const at::Tensor& hidden, const ForwardOptions& options,
                                     at::Tensor* sum_pi_squared) const {
  // Only the positions that predict a response token reach the head.
  const at::Tensor h = train_common::response_hidden(micro, hidden);
  const at::Tensor out = skeleton_.apply_head(skeleton_.norm(h)).to(at::kFloat);
  ModelOutput result;
  if (head_ == model::ModelHead::kValue) {
    result.values = to_rows(micro, out);
    return result;
  }
  const at::Tensor logits = options.temperature == 1.0 ? out : out / options.temperature;
  const at::Tensor tokens = train_common::response_tokens(micro);
  result.log_prob = to_rows(micro, at::log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1));
  if (options.entropy) result.entropy = to_rows(micro, entropy_from_logits(logits));
  if (sum_pi_squared != nullptr) *sum_pi_squared = to_rows(micro, sum_pi_squared_from_logits(logits));
  return result;
}

std::vector<FsdpEngine::MicroBatch> FsdpEngine::micro_batches(const Batch& batch, const ForwardOptions& options) const {
  std::vector<MicroBatch> micro =
      train_common::make_micro_batches(batch, options, skeleton_, device_, "fsdp", {options_.use_remove_padding});
  if (ulysses_) {
    ulysses_->check_same_rows(batch, "fsdp");
    for (MicroBatch& m : micro) ulysses_->slice(m, skeleton_);
  }
  return micro;
}

at::Tensor FsdpEngine::to_rows(const MicroBatch& micro, const at::Tensor& values) const {
  const bool sliced = ulysses_ && micro.packing && !micro.packing->rank_predictions.empty();
  return train_common::response_rows(micro, sliced ? ulysses_->gather_predictions(*micro.packing, values) : values);
}

ModelOutput FsdpEngine::forward(const Batch& batch, const ForwardOptions& options) {
  return forward_outputs(batch, options, nullptr);
}

ModelOutput FsdpEngine::forward_with_sum_pi_squared(const Batch& batch, const ForwardOptions& options,
                                                    at::Tensor& sum_pi_squared) {
  if (head_ == model::ModelHead::kValue) {
    throw ValueError("fsdp: sum_pi_squared needs the LM head; this engine holds a value head (the critic)");
  }
  return forward_outputs(batch, options, &sum_pi_squared);
}

ModelOutput FsdpEngine::forward_outputs(const Batch& batch, const ForwardOptions& options, at::Tensor* sum_pi_squared) {
  train_common::ResidentScope resident(placement_, OffloadSet::kParams);
  at::NoGradGuard no_grad;
  std::vector<MicroBatch> micro = micro_batches(batch, options);
  train_common::MicroBatchRouting routing(micro, config_, routing_replay_.replay, routing_replay_.record, "fsdp");
  std::vector<at::Tensor> hidden = forward_trunk(micro, nullptr);
  if (routing_replay_.record) recorded_routing_ = routing.stacked(micro, config_);
  std::vector<at::Tensor> log_prob, entropy, values, pi_squared;
  {
    GatheredUnit head(*this, head_unit(), false);
    std::optional<GatheredUnit> embed;
    if (tied()) embed.emplace(*this, embed_unit(), false);
    for (size_t m = 0; m < micro.size(); ++m) {
      at::Tensor micro_pi_squared;
      ModelOutput out = head_outputs(micro[m], hidden[m], options, sum_pi_squared ? &micro_pi_squared : nullptr);
      pi_squared.push_back(micro_pi_squared);
      log_prob.push_back(out.log_prob);
      entropy.push_back(out.entropy);
      values.push_back(out.values);
      hidden[m] = at::Tensor();
    }
  }
  const int64_t response_len = train_common::require_column(batch, columns::kResponses, "fsdp").size(1);
  ModelOutput output;
  if (head_ == model::ModelHead::kValue) {
    output.values = concat_or_empty(values, response_len, device_);
  } else {
    output.log_prob = concat_or_empty(log_prob, response_len, device_);
    if (options.entropy) output.entropy = concat_or_empty(entropy, response_len, device_);
    if (sum_pi_squared != nullptr) *sum_pi_squared = concat_or_empty(pi_squared, response_len, device_);
  }
  return output;
}

TrainStepOutput FsdpEngine::train_step(const Batch& batch, const ForwardOptions& options, const LossFunction& loss) {
  if (!trainable_)
    throw ValueError("fsdp: train_step on a frozen engine (trainable = false, e.g. the reference policy)");
  train_common::ResidentScope resident(placement_, OffloadSet::kAll);
  at::AutoGradMode grad_mode(true);
  zero_grads();  // a step that threw half-way left partial sums
  GradWorkspace workspace(max_padded_numel(), device_);
  std::vector<MicroBatch> micro = micro_batches(batch, options);
  // A mixture of experts records its routing: the router losses and their metrics read it.
  train_common::MicroBatchRouting routing(micro, config_, routing_replay_.replay, config_.is_moe(), "fsdp");

  at::Tensor counts = train_common::response_counts(batch, "fsdp");
  dp_.all_reduce_sum(counts);
  // The ranks of a sequence-parallel group hold the same rows: one data-parallel replica.
  const int64_t sp = ulysses_ ? ulysses_->size() : 1;
  GlobalBatchInfo global{dp_.size() / sp, counts[0].item<double>() / static_cast<double>(sp),
                         counts[1].item<double>() / static_cast<double>(sp)};

  std::vector<LayerStash> stash(static_cast<size_t>(config_.num_hidden_layers));
  std::vector<at::Tensor> hidden = forward_trunk(micro, &stash);
  std::vector<at::Tensor> grad_hidden(micro.size());
  MetricMeans metrics;
  // Every rank reports the same metrics: the mean over ranks of what each kept.
  metrics.add({{"activations_gb", at::scalar_tensor(stashed_bytes(stash) / static_cast<double>(1LL << 30))}});
  std::vector<train_common::MicroBatchRouterLoss> router_loss;
  if (config_.is_moe()) {
    const train_common::RouterLossCoeffs coeffs{options_.fsdp_config.moe_aux_loss_coeff,
                                                options_.fsdp_config.moe_z_loss_coeff};
    for (size_t m = 0; m < micro.size(); ++m) {
      // The mean over micro-batches (then over dp ranks, as gradients are averaged), as Megatron scales it.
      const double weight = 1.0 / static_cast<double>(micro.size());
      router_loss.emplace_back(routing.recorded(m), config_, micro[m].attention_mask, weight, coeffs);
      metrics.add(router_loss.back().metrics(routing.recorded(m)));
    }
  }
  {
    GatheredUnit head(*this, head_unit(), base_trains());
    std::optional<GatheredUnit> embed;
    if (tied()) embed.emplace(*this, embed_unit(), base_trains());
    UnitGrad head_grad = base_trains() ? start_unit_grad(head_unit(), workspace, 0) : UnitGrad{};
    UnitGrad embed_grad = tied() && base_trains() ? start_unit_grad(embed_unit(), workspace, 1) : UnitGrad{};
    for (size_t m = 0; m < micro.size(); ++m) {
      const at::Tensor x = hidden[m].detach().requires_grad_(true);
      hidden[m] = at::Tensor();
      const LossOutput out = loss(micro[m].rows, head_outputs(micro[m], x, options), global);
      if (!out.loss.defined() || out.loss.numel() != 1 || !out.loss.requires_grad())
        throw ValueError("fsdp: the loss function must return a scalar loss with gradient");
      std::vector<at::Tensor> inputs;
      if (base_trains()) {
        inputs = head.leaves();
        if (embed) inputs.insert(inputs.end(), embed->leaves().begin(), embed->leaves().end());
      }
      inputs.push_back(x);
      const auto grads = torch::autograd::grad({out.loss}, inputs, {}, false, false, /*allow_unused=*/true);
      if (base_trains()) {
        head.add_grads(head_grad, grads, 0);
        if (embed) embed->add_grads(embed_grad, grads, head.leaves().size());
      }
      grad_hidden[m] = grads.back().defined() ? grads.back() : at::zeros_like(x);
      metrics.add(out.metrics);
    }
    if (base_trains()) finish_unit_grad(head_unit(), head_grad);
    if (embed && base_trains()) finish_unit_grad(embed_unit(), embed_grad);
  }
  const bool router_losses = !router_loss.empty() && (options_.fsdp_config.moe_aux_loss_coeff != 0 ||
                                                      options_.fsdp_config.moe_z_loss_coeff != 0);
  backward_trunk(micro, stash, std::move(grad_hidden), workspace, router_losses ? &routing : nullptr,
                 router_losses ? &router_loss : nullptr);

  const double lr = schedule_.lr(step_);
  const double grad_norm = base_trains() ? clip_and_step() : lora_clip_and_step();
  TrainStepOutput result;
  result.metrics = metrics.dp_mean(dp_);
  result.metrics["grad_norm"] = grad_norm;
  result.metrics["lr"] = lr;
  return result;
}

void FsdpEngine::backward_trunk(std::vector<MicroBatch>& micro, std::vector<LayerStash>& stash,
                                std::vector<at::Tensor> grad_hidden, GradWorkspace& workspace,
                                train_common::MicroBatchRouting* routing,
                                const std::vector<train_common::MicroBatchRouterLoss>* router_loss) {
  for (int64_t layer = config_.num_hidden_layers - 1; layer >= 0; --layer) {
    LayerStash& saved = stash[layer];
    const bool recorded = saved.unit != nullptr;  // else checkpointing: gather again and recompute
    const std::unique_ptr<GatheredUnit> unit =
        recorded ? std::move(saved.unit) : std::make_unique<GatheredUnit>(*this, layer_unit(layer), base_trains());
    UnitGrad unit_grad = base_trains() ? start_unit_grad(layer_unit(layer), workspace, 0) : UnitGrad{};
    const std::vector<at::Tensor> trained = base_trains() ? unit->leaves() : lora_.layer_leaves(layer);
    for (size_t m = 0; m < micro.size(); ++m) {
      const at::Tensor x = recorded ? saved.inputs[m] : saved.inputs[m].detach().requires_grad_(true);
      const at::Tensor y = recorded ? saved.outputs[m] : skeleton_.layers[layer](x, micro[m].ctx, layer);
      std::vector<at::Tensor> inputs = trained;
      inputs.push_back(x);
      std::vector<at::Tensor> outputs = {y};
      std::vector<at::Tensor> output_grads = {grad_hidden[m]};
      if (router_loss != nullptr && config_.layer_is_sparse(layer)) {
        // The router logits of this layer's graph: the forward's, or the recompute's just above.
        outputs.push_back((*router_loss)[m].layer_part(routing->recorded(m).router_logits[layer]));
        output_grads.push_back(at::ones_like(outputs.back()));
      }
      const auto grads = torch::autograd::grad(outputs, inputs, output_grads, false, false, true);
      base_trains() ? unit->add_grads(unit_grad, grads, 0) : lora_.add_grads(layer, grads, 0);
      grad_hidden[m] = grads.back().defined() ? grads.back() : at::zeros_like(x);
    }
    saved = LayerStash{};
    if (base_trains()) finish_unit_grad(layer_unit(layer), unit_grad);
  }
  if (!base_trains()) return;  // frozen embeddings: nothing below them trains
  GatheredUnit embed(*this, embed_unit(), true);
  UnitGrad embed_grad = start_unit_grad(embed_unit(), workspace, 0);
  for (size_t m = 0; m < micro.size(); ++m) {
    const at::Tensor y = skeleton_.embed(micro[m].input_ids);
    const auto grads = torch::autograd::grad({y}, embed.leaves(), {grad_hidden[m]}, false, false, true);
    embed.add_grads(embed_grad, grads, 0);
  }
  finish_unit_grad(embed_unit(), embed_grad);
}

double FsdpEngine::clip_and_step() {
  materialize_cleared_grads();
  // Each shard's fp32 norm (no shard-sized double copy), squared and summed in double.
  at::Tensor squares = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device_));
  for (const train_common::ShardState& state : shards_) squares += state.grad.device().norm().to(at::kDouble).square();
  squares = squares.cpu();
  dp_.all_reduce_sum(squares);
  const double grad_norm = std::sqrt(squares.item<double>());
  if (const std::optional<train_common::AdamWHyper> hyper = begin_update(grad_norm)) {
    at::NoGradGuard no_grad;
    for (train_common::ShardState& state : shards_)
      train_common::adamw_update(state.param.device(), state.grad.device(), state.exp_avg.device(),
                                 state.exp_avg_sq.device(), *hyper);
  }
  zero_grads();
  return grad_norm;
}

std::optional<train_common::AdamWHyper> FsdpEngine::begin_update(double grad_norm) {
  const double lr = schedule_.lr(step_);
  ++step_;
  if (!std::isfinite(grad_norm)) return std::nullopt;  // verl skips the update and drops the gradients
  ++adam_steps_;
  train_common::AdamWHyper hyper{
      lr,         options_.optim.betas[0], options_.optim.betas[1], options_.optim.eps, options_.optim.weight_decay,
      adam_steps_};
  // Clipping scales the gradient inside the update's own pass over it (the gradients are dropped after).
  if (options_.grad_clip > 0) hyper.grad_scale = std::min(1.0, options_.grad_clip / (grad_norm + 1e-6));
  return hyper;
}

double FsdpEngine::lora_clip_and_step() {
  const double grad_norm = std::sqrt(lora_.reduce_grads(dp_));
  if (const std::optional<train_common::AdamWHyper> hyper = begin_update(grad_norm)) {
    at::NoGradGuard no_grad;
    for (auto& pair : lora_.pairs()) {
      train_common::adamw_update(pair->a, pair->grad_a, pair->exp_avg_a, pair->exp_avg_sq_a, *hyper);
      train_common::adamw_update(pair->b, pair->grad_b, pair->exp_avg_b, pair->exp_avg_sq_b, *hyper);
    }
  }
  lora_.zero_grads();
  return grad_norm;
}

void FsdpEngine::set_routing_replay(bool replay, bool record) {
  const train_common::RoutingReplay settings{replay, record};
  train_common::check_routing_replay(settings, config_, "fsdp");
  routing_replay_ = settings;
  recorded_routing_ = at::Tensor();
}

at::Tensor FsdpEngine::take_routing() { return std::exchange(recorded_routing_, at::Tensor()); }

}  // namespace rlcore::train_fsdp
