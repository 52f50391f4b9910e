// FsdpEngine: construction (layout, shards, initial weights), gathering and
// installing units, gradient reduction, weight export and offload accounting.
#include "fsdp_engine.h"

#include <filesystem>
#include <map>
#include <set>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/CPUGeneratorImpl.h>

#include "fsdp_engine_internal.h"
#include "rlcore/error.h"
#include "rlcore/safetensors.h"

namespace rlcore::fsdp {
namespace {

model::ModelConfig read_config(const std::string& model_path) {
  if (model_path.empty()) {
    throw ConfigError("fsdp: model_path is empty; the engine trains a Hugging Face checkpoint directory "
                      "(config.json + model.safetensors), e.g. one written by `rlcore model init`");
  }
  std::error_code error;
  if (!std::filesystem::is_directory(model_path, error))
    throw ConfigError("fsdp: model_path '" + model_path + "' is not a directory");
  return model::ModelConfig::from_file((std::filesystem::path(model_path) / "config.json").string());
}

model::ModelHead parse_head(const std::string& head) {
  if (head == "lm") return model::ModelHead::kCausalLm;
  if (head == "value") return model::ModelHead::kValue;
  throw ConfigError("fsdp: model_head must be 'lm' or 'value', got '" + head + "'");
}

bool is_ignorable(const std::string& name, model::ModelHead head, bool tied) {
  if (name.size() >= 19 && name.compare(name.size() - 19, 19, "rotary_emb.inv_freq") == 0) return true;
  // A critic starts from an LM checkpoint: its lm_head is not part of the value model.
  return name == "lm_head.weight" && (tied || head == model::ModelHead::kValue);
}

}  // namespace

FsdpEngine::FsdpEngine(const FsdpOptions& options, const ComponentContext& context)
    : options_(options),
      model_path_(context.model_path),
      head_(parse_head(context.model_head)),
      trainable_(context.trainable),
      device_(context.device.empty() ? std::string("cpu") : context.device),
      precision_(resolve_mixed_precision(options.fsdp_config)),
      dp_(context.comm),
      config_(read_config(context.model_path)),
      skeleton_(config_, head_, at::TensorOptions().device(at::kMeta).dtype(precision_.param)),
      schedule_(train::make_lr_schedule(options.optim, context.total_training_steps)) {
  require_compute_dtype(precision_.param, device_);
  if (!device_.is_cpu()) skeleton_.rotary = model::RotaryEmbedding(config_, device_);
  layouts_ = build_unit_layouts(model::parameter_specs(config_, head_), dp_.size());
  if (layouts_.size() != static_cast<size_t>(config_.num_hidden_layers) + 2 || layouts_.front().name != "embed" ||
      layouts_.back().name != "head") {
    throw ValueError("fsdp: unexpected parameter layout of the " + config_.model_type + " model");
  }
  std::map<std::string, at::Tensor*> by_name;
  for (const auto& [name, slot] : skeleton_.parameter_slots()) by_name.emplace(name, slot);
  for (const UnitLayout& layout : layouts_) {
    slots_.emplace_back();
    placeholders_.emplace_back();
    for (const UnitParam& p : layout.params) {
      slots_.back().push_back(by_name.at(p.name));
      placeholders_.back().push_back(*by_name.at(p.name));
    }
  }
  init_shards();
  load_initial_weights();
  OffloadSet parked = OffloadSet::kNone;
  if (options_.fsdp_config.param_offload) parked = parked | OffloadSet::kParams;
  if (options_.fsdp_config.optimizer_offload && trainable_) parked = parked | OffloadSet::kOptimizer;
  offload(parked);
  dp_.barrier();
}

bool FsdpEngine::tied() const { return config_.tie_word_embeddings && head_ == model::ModelHead::kCausalLm; }

void FsdpEngine::init_shards() {
  const at::TensorOptions fp32 = at::TensorOptions().dtype(at::kFloat).device(device_);
  shards_.clear();
  for (const UnitLayout& layout : layouts_) {
    train::ShardState state;
    state.param.device = at::zeros({layout.shard_size}, fp32);
    if (trainable_) {
      state.grad.device = at::zeros({layout.shard_size}, fp32);
      state.exp_avg.device = at::zeros({layout.shard_size}, fp32);
      state.exp_avg_sq.device = at::zeros({layout.shard_size}, fp32);
    }
    shards_.push_back(std::move(state));
  }
}

void FsdpEngine::load_initial_weights() {
  const SafetensorsCheckpoint checkpoint(model_path_);
  std::set<std::string> expected;
  for (const UnitLayout& layout : layouts_)
    for (const UnitParam& p : layout.params) expected.insert(p.name);
  for (const std::string& name : checkpoint.names()) {
    if (!expected.count(name) && !is_ignorable(name, head_, config_.tie_word_embeddings))
      throw ValueError("checkpoint '" + model_path_ + "': unexpected tensor '" + name + "' for a " + config_.model_type +
                       (head_ == model::ModelHead::kValue ? " value model" : " causal LM"));
  }
  // A critic made from an LM checkpoint gets a fresh score head (verl's critic does the same).
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(options_.seed));
  at::NoGradGuard no_grad;
  for (size_t u = 0; u < layouts_.size(); ++u) {
    const UnitLayout& layout = layouts_[u];
    const ElementRange own = owned_range(layout, dp_.rank());
    const int64_t base = dp_.rank() * layout.shard_size;
    for (const UnitParam& p : layout.params) {
      at::Tensor source;
      if (checkpoint.contains(p.name)) {
        source = checkpoint.view(p.name);
        if (source.sizes().vec() != p.shape)
          throw ValueError("checkpoint '" + model_path_ + "': tensor '" + p.name + "' has the wrong shape");
      } else if (head_ == model::ModelHead::kValue && p.name == "score.weight") {
        source = at::empty(p.shape, at::kFloat).normal_(0.0, config_.initializer_range, generator);
      } else if (head_ == model::ModelHead::kValue && p.name == "score.bias") {
        source = at::zeros(p.shape, at::kFloat);
      } else {
        throw ValueError("checkpoint '" + model_path_ + "' has no tensor '" + p.name + "'");
      }
      const ElementRange mine = intersect(own, ElementRange{p.offset, p.offset + p.numel});
      if (mine.size() == 0) continue;
      shards_[u].param.device.narrow(0, mine.begin - base, mine.size())
          .copy_(source.reshape(-1).narrow(0, mine.begin - p.offset, mine.size()));
    }
  }
}

at::Tensor FsdpEngine::gather_full(int64_t unit, at::ScalarType dtype) const {
  const at::Tensor& shard = shards_[static_cast<size_t>(unit)].param.device;
  if (!shard.defined()) throw ValueError("fsdp: parameters of unit '" + layouts_[unit].name + "' are offloaded");
  return dp_.all_gather_flat(shard.to(dtype));
}

void FsdpEngine::install(int64_t unit, const std::vector<at::Tensor>& params) {
  for (size_t i = 0; i < params.size(); ++i) *slots_[unit][i] = params[i];
}

void FsdpEngine::uninstall(int64_t unit) {
  for (size_t i = 0; i < slots_[unit].size(); ++i) *slots_[unit][i] = placeholders_[unit][i];
}

void FsdpEngine::reduce_gradient(int64_t unit, at::Tensor full_grad) {
  // Gloo in libtorch 1.13 has no reduce_scatter: all-reduce, then keep this rank's slice.
  dp_.all_reduce_mean(full_grad, precision_.reduce);
  const UnitLayout& layout = layouts_[static_cast<size_t>(unit)];
  shards_[unit].grad.device.add_(full_grad.narrow(0, dp_.rank() * layout.shard_size, layout.shard_size));
  grads_dirty_ = true;
}

GatheredUnit::GatheredUnit(FsdpEngine& engine, int64_t unit, bool requires_grad) : engine_(engine), unit_(unit) {
  at::NoGradGuard no_grad;
  const at::Tensor flat = engine_.gather_full(unit, engine_.precision_.param);
  for (const UnitParam& p : engine_.layouts_[static_cast<size_t>(unit)].params) {
    at::Tensor leaf = flat.narrow(0, p.offset, p.numel).view(p.shape).detach();
    if (requires_grad) leaf.requires_grad_(true);
    leaves_.push_back(std::move(leaf));
  }
  engine_.install(unit, leaves_);
}

void GatheredUnit::add_grads(at::Tensor& flat_grad, const std::vector<at::Tensor>& grads, size_t first) const {
  const auto& params = engine_.layouts_[static_cast<size_t>(unit_)].params;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& grad = grads.at(first + i);
    if (grad.defined()) flat_grad.narrow(0, params[i].offset, params[i].numel).add_(grad.reshape(-1).to(at::kFloat));
  }
}

GatheredUnit::~GatheredUnit() { engine_.uninstall(unit_); }

ResidentScope::ResidentScope(FsdpEngine& engine, OffloadSet needed)
    : engine_(engine),
      moved_(static_cast<OffloadSet>(static_cast<unsigned>(needed) & static_cast<unsigned>(engine.offloaded_))) {
  engine_.reload(moved_);
}

ResidentScope::~ResidentScope() { engine_.offload(moved_); }

std::vector<ParameterShard> FsdpEngine::parameter_shards() const {
  std::vector<ParameterShard> shards;
  for (size_t u = 0; u < layouts_.size(); ++u) {
    const UnitLayout& layout = layouts_[u];
    const ElementRange own = owned_range(layout, dp_.rank());
    const int64_t base = dp_.rank() * layout.shard_size;
    for (const UnitParam& p : layout.params) {
      const ElementRange mine = intersect(own, ElementRange{p.offset, p.offset + p.numel});
      if (mine.size() == 0) continue;
      shards.push_back(ParameterShard{p.name, p.shape, shards_[u].param.any().narrow(0, mine.begin - base, mine.size()),
                                      mine.begin - p.offset});
    }
  }
  return shards;
}

void FsdpEngine::for_each_full_parameter(const std::function<void(const std::string&, const at::Tensor&)>& visit) {
  ResidentScope resident(*this, OffloadSet::kParams);
  at::NoGradGuard no_grad;
  for (size_t u = 0; u < layouts_.size(); ++u) {
    const at::Tensor full = gather_full(static_cast<int64_t>(u));
    for (const UnitParam& p : layouts_[u].params) visit(p.name, full.narrow(0, p.offset, p.numel).view(p.shape));
  }
}

void FsdpEngine::offload(OffloadSet what) {
  for (train::ShardState& state : shards_) {
    if (contains(what, OffloadSet::kParams)) state.param.offload();
    if (contains(what, OffloadSet::kGrads)) state.grad.offload();
    if (contains(what, OffloadSet::kOptimizer)) {
      state.exp_avg.offload();
      state.exp_avg_sq.offload();
    }
  }
  offloaded_ = offloaded_ | what;
}

void FsdpEngine::reload(OffloadSet what) {
  for (train::ShardState& state : shards_) {
    if (contains(what, OffloadSet::kParams)) state.param.reload(device_);
    if (contains(what, OffloadSet::kGrads)) state.grad.reload(device_);
    if (contains(what, OffloadSet::kOptimizer)) {
      state.exp_avg.reload(device_);
      state.exp_avg_sq.reload(device_);
    }
  }
  offloaded_ = static_cast<OffloadSet>(static_cast<unsigned>(offloaded_) & ~static_cast<unsigned>(what));
}

TrainMemory FsdpEngine::memory() const {
  TrainMemory memory;
  for (const train::ShardState& state : shards_) {
    memory.param_bytes += state.param.device_bytes();
    memory.grad_bytes += state.grad.device_bytes();
    memory.optimizer_bytes += state.exp_avg.device_bytes() + state.exp_avg_sq.device_bytes();
    memory.host_bytes += state.param.host_bytes() + state.grad.host_bytes() + state.exp_avg.host_bytes() +
                         state.exp_avg_sq.host_bytes();
  }
  return memory;
}

void FsdpEngine::zero_grads() {
  for (train::ShardState& state : shards_)
    if (state.grad.device.defined()) state.grad.device.zero_();
  grads_dirty_ = false;
}

}  // namespace rlcore::fsdp
