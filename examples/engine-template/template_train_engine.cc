// TemplateTrainEngine: every rank holds the whole model (no sharding, one
// process); a checkpoint is one safetensors file of parameters and AdamW moments.
#include "template_train_engine.h"

#include <ATen/core/grad_mode.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "rlcore/comm_context.h"
#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"

namespace engine_template {

namespace fs = std::filesystem;
using namespace rlcore;

OptionsSchema<TrainOptions> train_options_schema() {
  OptionsSchema<TrainOptions::Optim> optim;
  optim.key("lr", &TrainOptions::Optim::lr, "AdamW learning rate (constant).", at_least(0))
      .key("weight_decay", &TrainOptions::Optim::weight_decay, "AdamW decoupled weight decay.", at_least(0));
  OptionsSchema<TrainOptions> schema;
  schema.section("optim", &TrainOptions::optim, optim)
      .key("grad_clip", &TrainOptions::grad_clip, "Global gradient-norm clip; <= 0 disables clipping.");
  return schema;
}

namespace {

constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;

model::Transformer load_model(const std::string& path) {
  if (path.empty()) throw ConfigError("template_train: model_path is empty (an HF checkpoint directory)");
  model::Transformer model(model::ModelConfig::from_file((fs::path(path) / "config.json").string()),
                           model::ModelHead::kCausalLm, at::TensorOptions().dtype(at::kFloat));
  model.load(SafetensorsCheckpoint(path).load_all());
  return model;
}

}  // namespace

TemplateTrainEngine::TemplateTrainEngine(const TrainOptions& options, const ComponentContext& context)
    : options_(options),
      model_path_(context.model_path),
      trainable_(context.trainable),
      model_(load_model(model_path_)) {
  if (context.device != "cpu") throw ConfigError("template_train runs on cpu only, not '" + context.device + "'");
  if (context.comm && context.comm->world_size() > 1) {
    throw ConfigError("template_train runs in one process; the pool has " + std::to_string(context.comm->world_size()));
  }
  if (context.model_head != "lm")
    throw ConfigError("template_train has an LM head only, not '" + context.model_head + "'");
  model_.set_requires_grad(trainable_);
  for (const auto& [name, param] : model_.named_parameters()) {
    exp_avg_.push_back(at::zeros_like(param).detach());
    exp_avg_sq_.push_back(at::zeros_like(param).detach());
  }
}

// Log-probs (and entropy) of the response tokens: the logits at P + t - 1 predict token t.
ModelOutput TemplateTrainEngine::compute(const Batch& batch, const ForwardOptions& options) const {
  const at::Tensor& ids = batch.tensor(columns::kInputIds);
  const at::Tensor& responses = batch.tensor(columns::kResponses);
  const int64_t response = responses.size(1);
  const int64_t prompt = ids.size(1) - response;
  const at::Tensor position_ids =
      batch.contains(columns::kPositionIds) ? batch.tensor(columns::kPositionIds) : at::Tensor();
  const at::Tensor logits = model_.forward(ids, batch.tensor(columns::kAttentionMask), position_ids)
                                .slice(1, prompt - 1, prompt - 1 + response) /
                            options.temperature;
  const at::Tensor logp = at::log_softmax(logits.to(at::kFloat), -1);
  ModelOutput out;
  out.log_prob = logp.gather(-1, responses.unsqueeze(-1)).squeeze(-1);
  if (options.entropy) out.entropy = -(logp.exp() * logp).sum(-1);
  return out;
}

ModelOutput TemplateTrainEngine::forward(const Batch& batch, const ForwardOptions& options) {
  at::NoGradGuard no_grad;
  return compute(batch, options);
}

TrainStepOutput TemplateTrainEngine::train_step(const Batch& batch, const ForwardOptions& options,
                                                const LossFunction& loss) {
  if (!trainable_) throw ValueError("template_train: train_step() on a frozen engine");
  const at::Tensor mask = batch.tensor(columns::kResponseMask);
  GlobalBatchInfo global;
  global.num_tokens = mask.sum().item<double>();
  global.num_sequences = (mask.sum(1) > 0).sum().item<double>();
  const int64_t rows =
      options.micro_batching.micro_batch_size > 0 ? options.micro_batching.micro_batch_size : batch.size();

  std::map<std::string, double> sums;
  int64_t micro_batches = 0;
  for (const Batch& micro : batch.split(rows)) {
    const LossOutput out = loss(micro, compute(micro, options), global);
    out.loss.backward();
    for (const auto& [name, value] : out.metrics) sums[name] += value.item<double>();
    ++micro_batches;
  }
  double squares = 0;
  for (const auto& [name, param] : model_.named_parameters()) {
    if (param.grad().defined()) squares += param.grad().to(at::kDouble).pow(2).sum().item<double>();
  }
  const double grad_norm = std::sqrt(squares);
  optimizer_step(options_.grad_clip > 0 ? std::min(1.0, options_.grad_clip / (grad_norm + 1e-6)) : 1.0);

  TrainStepOutput result;
  for (const auto& [name, sum] : sums) result.metrics[name] = sum / static_cast<double>(micro_batches);
  result.metrics["grad_norm"] = grad_norm;
  result.metrics["lr"] = options_.optim.lr;
  return result;
}

// torch.optim.AdamW (decoupled weight decay, bias-corrected moments).
void TemplateTrainEngine::optimizer_step(double grad_scale) {
  at::NoGradGuard no_grad;
  ++step_;
  const double lr = options_.optim.lr;
  const double bias_correction1 = 1.0 - std::pow(kBeta1, static_cast<double>(step_));
  const double bias_correction2 = 1.0 - std::pow(kBeta2, static_cast<double>(step_));
  const auto params = model_.named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor param = params[i].second;
    at::Tensor grad = param.grad();
    if (!grad.defined()) grad = at::zeros_like(param);
    if (grad_scale != 1.0) grad = grad * grad_scale;
    param.mul_(1.0 - lr * options_.optim.weight_decay);
    exp_avg_[i].mul_(kBeta1).add_(grad, 1.0 - kBeta1);
    exp_avg_sq_[i].mul_(kBeta2).addcmul_(grad, grad, 1.0 - kBeta2);
    const at::Tensor denom = (exp_avg_sq_[i].sqrt() / std::sqrt(bias_correction2)).add_(kEps);
    param.addcdiv_(exp_avg_[i], denom, -lr / bias_correction1);
    param.mutable_grad() = at::Tensor();
  }
}

std::vector<ParameterShard> TemplateTrainEngine::parameter_shards() const {
  std::vector<ParameterShard> shards;
  for (const auto& [name, param] : model_.named_parameters()) {
    shards.push_back({name, param.sizes().vec(), param.detach().reshape({-1}), 0});
  }
  return shards;
}

void TemplateTrainEngine::for_each_full_parameter(
    const std::function<void(const std::string&, const at::Tensor&)>& visit) {
  for (const auto& [name, param] : model_.named_parameters()) visit(name, param.detach());
}

void TemplateTrainEngine::save_checkpoint(const std::string& dir) {
  fs::create_directories(dir);
  NamedTensors tensors;
  const auto params = model_.named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    tensors.emplace_back(params[i].first, params[i].second.detach());
    tensors.emplace_back(params[i].first + ".exp_avg", exp_avg_[i]);
    tensors.emplace_back(params[i].first + ".exp_avg_sq", exp_avg_sq_[i]);
  }
  save_safetensors(fs::path(dir) / "template_checkpoint.safetensors", tensors, {{"step", std::to_string(step_)}});
}

void TemplateTrainEngine::load_checkpoint(const std::string& dir) {
  const fs::path file = fs::path(dir) / "template_checkpoint.safetensors";
  if (!fs::exists(file)) throw IoError("template_train: no checkpoint '" + file.string() + "'");
  const SafetensorsFile checkpoint(file);
  auto read = [&](const std::string& name) {
    if (!checkpoint.contains(name)) throw FormatError("template_train: '" + file.string() + "' lacks '" + name + "'");
    return checkpoint.load(name);
  };
  at::NoGradGuard no_grad;
  const auto params = model_.named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor param = params[i].second;
    param.copy_(read(params[i].first));
    exp_avg_[i].copy_(read(params[i].first + ".exp_avg"));
    exp_avg_sq_[i].copy_(read(params[i].first + ".exp_avg_sq"));
  }
  step_ = std::stoll(checkpoint.metadata().at("step"));
}

// config.json and the weights in HF form; the tokenizer files come from the input checkpoint.
void TemplateTrainEngine::export_hf(const std::string& dir) {
  fs::create_directories(dir);
  std::ofstream(fs::path(dir) / "config.json") << model_.config().to_json_text();
  NamedTensors weights;
  for (const auto& [name, param] : model_.named_parameters()) weights.emplace_back(name, param.detach());
  save_safetensors_checkpoint(dir, weights, uint64_t{2'000'000'000});
  for (const char* file : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    if (fs::exists(fs::path(model_path_) / file)) {
      fs::copy_file(fs::path(model_path_) / file, fs::path(dir) / file, fs::copy_options::overwrite_existing);
    }
  }
}

// Everything lives in host memory already: nothing to move.
void TemplateTrainEngine::offload(OffloadSet) {}
void TemplateTrainEngine::reload(OffloadSet) {}

TrainMemory TemplateTrainEngine::memory() const {
  TrainMemory memory;
  for (size_t i = 0; i < exp_avg_.size(); ++i) {
    memory.param_bytes += static_cast<int64_t>(exp_avg_[i].nbytes());
    memory.optimizer_bytes += static_cast<int64_t>(exp_avg_[i].nbytes() + exp_avg_sq_[i].nbytes());
  }
  return memory;
}

}  // namespace engine_template
