// MegatronEngine's forward and train_step: micro-batches through the pipeline
// stages (GPipe: every forward, then every backward), the loss on the last
// stage, gradients summed for the tied embedding copies, averaged over dp,
// clipped by the global norm and applied by AdamW on the fp32 masters.
#include <cmath>
#include <cstring>
#include <map>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "train-common/adamw.h"
#include "megatron_engine.h"
#include "rlcore/batch.h"
#include "rlcore/model/layers.h"
#include "rlcore/model/routing.h"
#include "train-common/micro_batches.h"
#include "rlcore/error.h"
#include "router_losses.h"
#include "train-common/router_losses.h"

namespace rlcore::train_megatron {
namespace {

// Point-to-point transfers between neighbouring stages; sends complete when waited for.
class StageLink {
 public:
  explicit StageLink(const CommGroup& pp) : pp_(pp) {}
  void send(const at::Tensor& tensor, int64_t to, int tag) {
    std::vector<at::Tensor> buffer = {tensor.detach().to(at::kFloat).contiguous()};
    pending_.push_back(pp_.backend().send(buffer, static_cast<int>(to), tag));
    buffers_.push_back(buffer.front());
  }
  at::Tensor recv(at::IntArrayRef shape, const at::Device& device, int64_t from, int tag) {
    std::vector<at::Tensor> buffer = {at::empty(shape, at::TensorOptions().dtype(at::kFloat).device(device))};
    pp_.backend().recv(buffer, static_cast<int>(from), tag)->wait();
    return buffer.front();
  }
  void wait_sends() {
    for (auto& work : pending_) work->wait();
    pending_.clear();
    buffers_.clear();
  }

 private:
  const CommGroup& pp_;
  std::vector<c10::intrusive_ptr<c10d::Work>> pending_;
  std::vector<at::Tensor> buffers_;  // alive until their sends complete
};

// The last stage's [rows, R] outputs on every stage.
at::Tensor share_from_last_stage(const ParallelGroups& groups, at::Tensor local, at::IntArrayRef shape,
                                 const at::Device& device) {
  if (groups.pp.size() == 1) return local;
  at::Tensor shared =
      groups.last_stage() ? local.contiguous() : at::empty(shape, at::TensorOptions().dtype(at::kFloat).device(device));
  groups.pp.broadcast(shared, groups.pp.size() - 1);
  return shared;
}

// Loss metrics: summed over micro-batches on the last stage, then the mean over
// micro-batches and dp ranks on every rank.
class MetricSums {
 public:
  void add(const std::map<std::string, at::Tensor>& metrics) {
    for (const auto& [name, value] : metrics) {
      sums_[name] += value.detach().to(at::kDouble).item<double>();
      counts_[name] += 1;
    }
  }
  std::map<std::string, double> mean(const ParallelGroups& groups) const {
    // Names travel as text from the last stage, which alone ran the loss.
    std::string names;
    std::vector<double> values;
    for (const auto& [name, sum] : sums_) {
      names += name + '\n';
      values.push_back(sum / counts_.at(name));
    }
    at::Tensor size = at::tensor({static_cast<int64_t>(names.size()), static_cast<int64_t>(values.size())}, at::kLong);
    const int64_t last = groups.pp.size() - 1;
    if (groups.pp.size() > 1) groups.pp.broadcast(size, last);
    at::Tensor text = at::zeros({size[0].item<int64_t>()}, at::kByte);
    at::Tensor numbers = at::zeros({size[1].item<int64_t>()}, at::kDouble);
    if (groups.last_stage()) {
      if (!names.empty()) std::memcpy(text.data_ptr(), names.data(), names.size());  // empty: data_ptr() is null
      numbers.copy_(at::tensor(values, at::kDouble));
    }
    if (groups.pp.size() > 1) {
      groups.pp.broadcast(text, last);
      groups.pp.broadcast(numbers, last);
    }
    groups.dp.all_reduce(numbers);
    numbers.div_(static_cast<double>(groups.dp.size()));
    std::map<std::string, double> out;
    const std::string received(static_cast<const char*>(text.data_ptr()), static_cast<size_t>(text.numel()));
    size_t start = 0;
    for (int64_t i = 0; i < numbers.numel(); ++i) {
      const size_t end = received.find('\n', start);
      out[received.substr(start, end - start)] = numbers[i].item<double>();
      start = end + 1;
    }
    return out;
  }

 private:
  std::map<std::string, double> sums_;
  std::map<std::string, int64_t> counts_;
};

}  // namespace

struct MegatronEngine::MetricSums : train_megatron::MetricSums {};

struct MegatronEngine::PipelineResult {
  std::vector<TokenLogProbs> outputs;  // last stage, forward only: one per micro-batch
  MetricSums metrics;
  std::vector<model::MoeRouting> routing;  // per micro-batch, this stage's sparse layers (when recorded)
};

MegatronEngine::PipelineResult MegatronEngine::run_pipeline(std::vector<MicroBatch>& micro,
                                                            const ForwardOptions& options, const LossFunction* loss,
                                                            const GlobalBatchInfo& global,
                                                            const std::vector<at::Tensor>& weights,
                                                            bool sum_pi_squared) {
  const bool training = loss != nullptr;
  const int64_t stage = groups_.pp.rank();
  const int tag_base = static_cast<int>(micro.size());
  StageLink link(groups_.pp);
  std::vector<LayerWeights> layers;
  for (int64_t layer = first_layer_; layer < end_layer_; ++layer) layers.push_back(layer_weights(weights, layer));
  PipelineResult result;
  std::vector<at::Tensor> inputs(micro.size()), outputs(micro.size()), losses(micro.size());
  // Training a mixture of experts records every sparse layer's routing for the router's losses.
  const bool record = (training && config_.is_moe()) || routing_replay_.record;
  std::vector<model::MoeRouting>& routing = result.routing;
  routing.assign(record ? micro.size() : 0, model::MoeRouting(static_cast<size_t>(config_.num_hidden_layers)));
  const train_common::MicroBatchRouting replayed(micro, config_, routing_replay_.replay, false, "megatron");
  for (size_t m = 0; m < micro.size(); ++m) {
    const MicroBatch& mb = micro[m];
    at::Tensor x;
    if (groups_.first_stage()) {
      x = stage_.embed(mb.input_ids, weight(weights, "embedding.word_embeddings.weight"));
    } else {
      inputs[m] = link.recv({mb.input_ids.size(0), mb.input_ids.size(1), config_.hidden_size}, device_, stage - 1,
                            static_cast<int>(m));
      if (training) inputs[m].requires_grad_(true);
      x = inputs[m].to(compute_dtype_);
    }
    for (size_t l = 0; l < layers.size(); ++l) {
      const int64_t layer = first_layer_ + static_cast<int64_t>(l);
      const at::Tensor replay =
          mb.ctx.replay != nullptr ? mb.ctx.replay->chosen[static_cast<size_t>(layer)] : at::Tensor();
      if (routing.empty() || !config_.layer_is_sparse(layer)) {
        x = stage_.layer(x, layers[l], mb.ctx, nullptr, replay);
        continue;
      }
      model::Routed routed;
      x = stage_.layer(x, layers[l], mb.ctx, &routed, replay);
      routing[m].chosen[static_cast<size_t>(layer)] = std::move(routed.chosen);
      routing[m].router_logits[static_cast<size_t>(layer)] = std::move(routed.router_logits);
    }
    if (!groups_.last_stage()) {
      link.send(x, stage + 1, static_cast<int>(m));
      outputs[m] = x;
      continue;
    }
    // Only the positions that predict a response token reach the head.
    TokenLogProbs out = stage_.head(
        train_common::response_hidden(mb, x), weight(weights, "decoder.final_layernorm.weight"), output_weight(weights),
        train_common::response_tokens(mb), options.temperature, options.entropy, sum_pi_squared);
    for (at::Tensor* field : {&out.log_prob, &out.entropy, &out.sum_pi_squared}) {
      if (field->defined()) *field = train_common::response_rows(mb, *field);
    }
    if (!training) {
      result.outputs.push_back(std::move(out));
      continue;
    }
    ModelOutput model_output;
    model_output.log_prob = out.log_prob;
    model_output.entropy = out.entropy;
    const LossOutput l = (*loss)(mb.rows, model_output, global);
    if (!l.loss.defined() || l.loss.numel() != 1 || !l.loss.requires_grad())
      throw ValueError("megatron: the loss function must return a scalar loss with gradient");
    losses[m] = l.loss;
    result.metrics.add(l.metrics);
  }
  link.wait_sends();
  if (!training) return result;
  const std::vector<at::Tensor> router_losses = add_router_losses(micro, routing, result.metrics);
  for (size_t m = 0; m < micro.size(); ++m) {
    const at::Tensor& extra = router_losses[m];
    const bool with_extra = extra.defined() && extra.requires_grad();
    if (groups_.last_stage()) {
      torch::autograd::backward({with_extra ? losses[m] + extra : losses[m]});
    } else {
      const at::Tensor grad = link.recv(outputs[m].sizes(), device_, stage + 1, tag_base + static_cast<int>(m));
      if (with_extra) {
        torch::autograd::backward({outputs[m], extra}, {grad.to(outputs[m].scalar_type()), at::ones_like(extra)});
      } else {
        torch::autograd::backward({outputs[m]}, {grad.to(outputs[m].scalar_type())});
      }
    }
    outputs[m] = losses[m] = at::Tensor();
    if (!groups_.first_stage()) link.send(inputs[m].grad(), stage - 1, tag_base + static_cast<int>(m));
  }
  link.wait_sends();
  return result;
}

std::vector<at::Tensor> MegatronEngine::add_router_losses(const std::vector<MicroBatch>& micro,
                                                          const std::vector<model::MoeRouting>& routing,
                                                          MetricSums& metrics) {
  std::vector<at::Tensor> extra(micro.size());
  if (routing.empty()) return extra;
  std::vector<at::Tensor> masks;
  for (const MicroBatch& mb : micro) masks.push_back(mb.attention_mask);
  const std::vector<RouterLosses> parts = stage_router_losses(config_, routing, masks, groups_.pp);
  const double aux_coeff = options_.megatron.moe_aux_loss_coeff;
  const double z_coeff = options_.megatron.moe_z_loss_coeff;
  const double per_micro = 1.0 / static_cast<double>(micro.size());
  at::Tensor sums = at::zeros({2}, at::kDouble);
  for (size_t m = 0; m < micro.size(); ++m) {
    sums[0] += parts[m].aux.item<double>() * per_micro;
    sums[1] += parts[m].z_loss.item<double>() * per_micro;
    // The mean over micro-batches (the policy loss is summed over them, already scaled).
    if (aux_coeff > 0 || z_coeff > 0) extra[m] = (aux_coeff * parts[m].aux + z_coeff * parts[m].z_loss) * per_micro;
  }
  groups_.pp.all_reduce(sums);  // each stage holds its layers' parts
  if (groups_.last_stage())
    metrics.add({{train_common::kMoeAuxLoss, sums[0].clone()}, {train_common::kMoeZLoss, sums[1].clone()}});
  return extra;
}

ModelOutput MegatronEngine::forward(const Batch& batch, const ForwardOptions& options) {
  return forward_outputs(batch, options, nullptr);
}

ModelOutput MegatronEngine::forward_with_sum_pi_squared(const Batch& batch, const ForwardOptions& options,
                                                        at::Tensor& sum_pi_squared) {
  return forward_outputs(batch, options, &sum_pi_squared);
}

ModelOutput MegatronEngine::forward_outputs(const Batch& batch, const ForwardOptions& options,
                                            at::Tensor* sum_pi_squared) {
  train_common::ResidentScope resident(placement_, OffloadSet::kParams);
  at::NoGradGuard no_grad;
  std::vector<MicroBatch> micro =
      train_common::make_micro_batches(batch, options, skeleton_, device_, "megatron", {options_.use_remove_padding});
  const PipelineResult result =
      run_pipeline(micro, options, nullptr, {}, compute_weights(false), sum_pi_squared != nullptr);
  if (routing_replay_.record) recorded_routing_ = stacked_routing(micro, result.routing);
  const int64_t rows = train_common::require_column(batch, columns::kResponses, "megatron").size(0);
  const int64_t response_len = train_common::require_column(batch, columns::kResponses, "megatron").size(1);
  // On the last stage, one field of every micro-batch's outputs, concatenated.
  const at::TensorOptions fp32 = at::TensorOptions().dtype(at::kFloat).device(device_);
  auto last_stage_rows = [&](at::Tensor TokenLogProbs::*field) {
    if (!groups_.last_stage()) return at::Tensor();
    std::vector<at::Tensor> parts;
    for (const TokenLogProbs& out : result.outputs) parts.push_back(out.*field);
    return parts.empty() ? at::zeros({0, response_len}, fp32) : at::cat(parts, 0);
  };
  auto shared = [&](at::Tensor TokenLogProbs::*field) {
    return share_from_last_stage(groups_, last_stage_rows(field), {rows, response_len}, device_);
  };
  ModelOutput output;
  output.log_prob = shared(&TokenLogProbs::log_prob);
  if (options.entropy) output.entropy = shared(&TokenLogProbs::entropy);
  if (sum_pi_squared != nullptr) *sum_pi_squared = shared(&TokenLogProbs::sum_pi_squared);
  return output;
}

TrainStepOutput MegatronEngine::train_step(const Batch& batch, const ForwardOptions& options,
                                           const LossFunction& loss) {
  if (!trainable_)
    throw ValueError("megatron: train_step on a frozen engine (trainable = false, e.g. the reference policy)");
  train_common::ResidentScope resident(placement_, OffloadSet::kAll);
  at::AutoGradMode grad_mode(true);
  zero_grads();  // a step that threw half-way may have left partial sums
  std::vector<MicroBatch> micro =
      train_common::make_micro_batches(batch, options, skeleton_, device_, "megatron", {options_.use_remove_padding});

  at::Tensor counts = train_common::response_counts(batch, "megatron");
  groups_.dp.all_reduce(counts);
  const GlobalBatchInfo global{groups_.dp.size(), counts[0].item<double>(), counts[1].item<double>()};

  const std::vector<at::Tensor> leaves = compute_weights(true);
  PipelineResult result = run_pipeline(micro, options, &loss, global, leaves);
  accumulate_gradients(leaves);
  reduce_gradients();
  const double lr = schedule_.lr(step_);
  const double grad_norm = clip_and_step();
  TrainStepOutput out;
  out.metrics = result.metrics.mean(groups_);
  out.metrics["grad_norm"] = grad_norm;
  out.metrics["lr"] = lr;
  return out;
}

void MegatronEngine::accumulate_gradients(const std::vector<at::Tensor>& leaves) {
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& grad = leaves[i].grad();
    if (grad.defined()) params_[i].state.grad.device().add_(grad.to(at::kFloat));
  }
}

void MegatronEngine::reduce_gradients() {
  at::NoGradGuard no_grad;
  // Tied embeddings over stages: stage 0's and the last stage's copies get the sum.
  if (config_.tie_word_embeddings && groups_.pp.size() > 1) {
    const std::string name = "embedding.word_embeddings.weight";
    at::Tensor* grad = nullptr;
    for (LocalParam& p : params_)
      if (p.meta.name == name) grad = &p.state.grad.device();
    at::Tensor shared = grad ? grad->clone()
                             : at::zeros({config_.vocab_size / groups_.tp.size(), config_.hidden_size},
                                         at::TensorOptions().dtype(at::kFloat).device(device_));
    groups_.pp.all_reduce(shared);
    for (LocalParam& p : params_)
      if (p.meta.name == name) p.state.grad.device().copy_(shared);
  }
  // Dense gradients are averaged over dp. An expert's gradient already sums the
  // tokens of every ep rank; summed over edp it covers all dp ranks, so it is
  // divided by dp too (Megatron-core's expert gradient scaling).
  average_over(groups_.dp, [](const LocalParam& p) { return !p.expert; });
  average_over(groups_.edp, [](const LocalParam& p) { return p.expert; });
}

void MegatronEngine::average_over(const CommGroup& group, const std::function<bool(const LocalParam&)>& which) {
  if (groups_.dp.size() == 1) return;
  std::vector<at::Tensor> grads;
  for (LocalParam& p : params_)
    if (which(p)) grads.push_back(p.state.grad.device().reshape(-1));
  if (grads.empty()) return;
  at::Tensor flat = at::cat(grads);
  group.all_reduce(flat);
  flat.div_(static_cast<double>(groups_.dp.size()));
  int64_t offset = 0;
  for (LocalParam& p : params_) {
    if (!which(p)) continue;
    const int64_t n = p.state.grad.device().numel();
    p.state.grad.device().copy_(flat.narrow(0, offset, n).view_as(p.state.grad.device()));
    offset += n;
  }
}

double MegatronEngine::clip_and_step() {
  at::Tensor squares = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device_));
  at::Tensor expert_squares = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device_));
  for (const LocalParam& p : params_)
    if (p.counted_in_norm) (p.expert ? expert_squares : squares) += p.state.grad.device().to(at::kDouble).pow(2).sum();
  expert_squares = expert_squares.cpu();
  groups_.ep.all_reduce(expert_squares);  // each ep rank holds other experts
  squares = squares.cpu() + expert_squares;
  groups_.tp.all_reduce(squares);
  groups_.pp.all_reduce(squares);
  const double grad_norm = std::sqrt(squares.item<double>());
  const double lr = schedule_.lr(step_);
  ++step_;
  if (!std::isfinite(grad_norm)) {  // verl skips the update and drops the gradients
    zero_grads();
    return grad_norm;
  }
  if (options_.grad_clip > 0) {
    const double coef = std::min(1.0, options_.grad_clip / (grad_norm + 1e-6));
    if (coef < 1.0)
      for (LocalParam& p : params_) p.state.grad.device().mul_(coef);
  }
  ++adam_steps_;
  const train_common::AdamWHyper hyper{
      lr,         options_.optim.betas[0], options_.optim.betas[1], options_.optim.eps, options_.optim.weight_decay,
      adam_steps_};
  at::NoGradGuard no_grad;
  for (LocalParam& p : params_)
    train_common::adamw_update(p.state.param.device(), p.state.grad.device(), p.state.exp_avg.device(),
                               p.state.exp_avg_sq.device(), hyper);
  zero_grads();
  return grad_norm;
}

void MegatronEngine::zero_grads() {
  for (LocalParam& p : params_)
    if (p.state.grad.device().defined()) p.state.grad.device().zero_();
}

at::Tensor MegatronEngine::stacked_routing(const std::vector<MicroBatch>& micro,
                                           const std::vector<model::MoeRouting>& routing) const {
  const std::vector<int64_t> sparse = model::sparse_layers(config_);
  std::vector<at::Tensor> parts;
  for (size_t m = 0; m < micro.size(); ++m) {
    const at::IntArrayRef tokens = micro[m].input_ids.sizes();
    // Expert + 1 in this stage's layers, 0 in the others' (and at packed padding): summed over pp, every layer's.
    at::Tensor part =
        at::zeros({tokens[0], tokens[1], static_cast<int64_t>(sparse.size()), config_.num_experts_per_tok},
                  at::TensorOptions().dtype(at::kLong).device(device_));
    for (size_t s = 0; s < sparse.size(); ++s) {
      const at::Tensor& chosen = routing[m].chosen[static_cast<size_t>(sparse[s])];
      if (chosen.defined()) part.select(2, static_cast<int64_t>(s)).copy_(chosen.view({tokens[0], tokens[1], -1}) + 1);
    }
    parts.push_back(train_common::padded_routing(micro[m], part, 0));
  }
  at::Tensor all = at::cat(parts);
  groups_.pp.all_reduce(all);
  return (all - 1).to(at::kCPU, at::kShort);
}

void MegatronEngine::set_routing_replay(bool replay, bool record) {
  const train_common::RoutingReplay settings{replay, record};
  train_common::check_routing_replay(settings, config_, "megatron");
  routing_replay_ = settings;
  recorded_routing_ = at::Tensor();
}

at::Tensor MegatronEngine::take_routing() { return std::exchange(recorded_routing_, at::Tensor()); }

}  // namespace rlcore::train_megatron
