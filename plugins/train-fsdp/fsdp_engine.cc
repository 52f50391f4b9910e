// FsdpEngine: construction (layout, shards, initial weights), gathering and
// installing units, gradient reduction, weight export and offload accounting.
#include "fsdp_engine.h"

#include <map>
#include <set>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/CPUGeneratorImpl.h>

#include "train-common/engine_device.h"
#include "fsdp_engine_internal.h"
#include "rlcore/comm_context.h"
#include "rlcore/device.h"
#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"

namespace rlcore::train_fsdp {
namespace {

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
      device_(train_common::engine_device(context, "fsdp")),
      placement_(device_, [this] { return shard_states(); }),
      precision_(resolve_mixed_precision(options.fsdp_config)),
      // A pool with sequence-parallel groups is sharded over all of it, whatever this engine's own sp
      // size: an engine without sp then holds its group's rows twice, which averaging leaves unchanged.
      dp_(context.comm, context.comm != nullptr && context.comm->has_group("sp")),
      config_(model::ModelConfig::from_checkpoint_dir(context.model_path, "fsdp")),
      skeleton_(config_, head_, at::TensorOptions().device(at::kMeta).dtype(precision_.param)),
      schedule_(train_common::make_lr_schedule(options.optim, context.total_training_steps)) {
  check_dtype_supported(device_, precision_.param, "fsdp_config.mixed_precision.param_dtype");
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
  ulysses_ = make_ulysses(options_.ulysses_sequence_parallel_size, options_.use_remove_padding, context.comm, config_);
  lora_ = make_lora_adapters(options_.lora, skeleton_, device_, static_cast<uint64_t>(options_.seed));
  init_shards();
  load_initial_weights();
  OffloadSet parked = OffloadSet::kNone;
  if (options_.fsdp_config.param_offload) parked = parked | OffloadSet::kParams;
  if (options_.fsdp_config.optimizer_offload && trainable_) parked = parked | OffloadSet::kOptimizer;
  offload(parked);
  dp_.barrier();
}

int64_t FsdpEngine::max_padded_numel() const {
  int64_t most = 0;
  for (const UnitLayout& layout : layouts_) most = std::max(most, layout.padded());
  return most;
}

bool FsdpEngine::tied() const { return config_.tie_word_embeddings && head_ == model::ModelHead::kCausalLm; }

void FsdpEngine::init_shards() {
  const at::TensorOptions fp32 = at::TensorOptions().dtype(at::kFloat).device(device_);
  shards_.clear();
  for (const UnitLayout& layout : layouts_) {
    train_common::ShardState state;
    state.param.device() = at::zeros({layout.shard_size}, fp32);
    if (trainable_ && base_trains()) {
      state.grad.device() = at::zeros({layout.shard_size}, fp32);
      state.exp_avg.device() = at::zeros({layout.shard_size}, fp32);
      state.exp_avg_sq.device() = at::zeros({layout.shard_size}, fp32);
    }
    shards_.push_back(std::move(state));
  }
  grad_cleared_.assign(shards_.size(), false);  // at::zeros: really zero
}

void FsdpEngine::load_initial_weights() {
  const SafetensorsCheckpoint checkpoint(model_path_);
  std::set<std::string> expected;
  for (const UnitLayout& layout : layouts_)
    for (const UnitParam& p : layout.params) expected.insert(p.name);
  for (const std::string& name : checkpoint.names()) {
    if (!expected.count(name) && !is_ignorable(name, head_, config_.tie_word_embeddings))
      throw ValueError("checkpoint '" + model_path_ + "': unexpected tensor '" + name + "' for a " +
                       config_.model_type + (head_ == model::ModelHead::kValue ? " value model" : " causal LM"));
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
      shards_[u]
          .param.device()
          .narrow(0, mine.begin - base, mine.size())
          .copy_(source.reshape(-1).narrow(0, mine.begin - p.offset, mine.size()));
    }
  }
}

at::Tensor FsdpEngine::gather_full(int64_t unit, at::ScalarType dtype) const {
  const at::Tensor& shard = shards_[static_cast<size_t>(unit)].param.device();
  if (!shard.defined()) throw ValueError("fsdp: parameters of unit '" + layouts_[unit].name + "' are offloaded");
  return dp_.all_gather_flat(shard.to(dtype));
}

void FsdpEngine::check_destination(int64_t unit, const at::Tensor& into) const {
  const UnitLayout& layout = layouts_[static_cast<size_t>(unit)];
  if (into.dim() != 1 || !into.is_contiguous() || into.numel() < layout.padded() || into.device() != device_ ||
      !at::isFloatingType(into.scalar_type())) {
    throw ValueError("fsdp: the destination of unit '" + layout.name +
                     "' must be a contiguous 1-D floating tensor of " + std::to_string(layout.padded()) +
                     " elements or more on " + device_.str() + " (got " + std::to_string(into.numel()) + " of " +
                     c10::toString(into.scalar_type()) + " on " + into.device().str() + ")");
  }
}

at::Tensor FsdpEngine::gather_into(int64_t unit, const at::Tensor& into) const {
  const UnitLayout& layout = layouts_[static_cast<size_t>(unit)];
  const at::Tensor& shard = shards_[static_cast<size_t>(unit)].param.device();
  if (!shard.defined()) throw ValueError("fsdp: parameters of unit '" + layout.name + "' are offloaded");
  at::Tensor full = into.narrow(0, 0, layout.padded());
  dp_.all_gather_into(shard, full);
  return full;
}

void FsdpEngine::install(int64_t unit, const std::vector<at::Tensor>& params) {
  for (size_t i = 0; i < params.size(); ++i) *slots_[unit][i] = params[i];
}

void FsdpEngine::uninstall(int64_t unit) {
  for (size_t i = 0; i < slots_[unit].size(); ++i) *slots_[unit][i] = placeholders_[unit][i];
}

void FsdpEngine::reduce_gradient(int64_t unit, at::Tensor full_grad) {
  const at::Tensor mine = dp_.reduce_scatter_mean(full_grad, precision_.reduce);
  at::Tensor& grad = shards_[unit].grad.device();
  grad_cleared_[unit] ? grad.copy_(mine) : grad.add_(mine);
  grad_cleared_[unit] = false;
}

void FsdpEngine::materialize_cleared_grads() {
  for (size_t u = 0; u < shards_.size(); ++u) {
    if (grad_cleared_[u] && shards_[u].grad.device().defined()) shards_[u].grad.device().zero_();
    grad_cleared_[u] = false;
  }
}

at::Tensor GradWorkspace::take(int64_t numel, int slot) {
  at::Tensor& buffer = slots_[slot];
  if (!buffer.defined()) buffer = at::empty({max_numel_}, at::TensorOptions().dtype(at::kFloat).device(device_));
  return buffer.narrow(0, 0, numel);
}

UnitGrad FsdpEngine::start_unit_grad(int64_t unit, GradWorkspace& workspace, int slot) {
  UnitGrad grad;
  if (dp_.size() == 1 && precision_.reduce == at::kFloat) {
    grad.flat = shards_[unit].grad.device();
    grad.direct = true;
    grad.written = !grad_cleared_[unit];
  } else {
    grad.flat = workspace.take(layouts_[unit].padded(), slot);
  }
  return grad;
}

void FsdpEngine::finish_unit_grad(int64_t unit, UnitGrad& grad) {
  if (!grad.written) grad.flat.zero_();  // this rank had no rows: it still takes part in the reduction
  if (grad.direct) {
    grad_cleared_[unit] = false;
  } else {
    reduce_gradient(unit, grad.flat);
  }
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

void GatheredUnit::add_grads(UnitGrad& grad, const std::vector<at::Tensor>& grads, size_t first) const {
  const UnitLayout& layout = engine_.layouts_[static_cast<size_t>(unit_)];
  for (size_t i = 0; i < layout.params.size(); ++i) {
    at::Tensor range = grad.flat.narrow(0, layout.params[i].offset, layout.params[i].numel);
    // copy_ and add_ convert a 16-bit gradient on the fly, without a converted temporary.
    const at::Tensor& g = grads.at(first + i);
    if (g.defined()) {
      grad.written ? range.add_(g.reshape(-1)) : range.copy_(g.reshape(-1));
    } else if (!grad.written) {
      range.zero_();
    }
  }
  if (!grad.written) grad.flat.narrow(0, layout.numel, grad.flat.numel() - layout.numel).zero_();  // padding
  grad.written = true;
}

GatheredUnit::~GatheredUnit() { engine_.uninstall(unit_); }

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

void FsdpEngine::visit_unit(int64_t unit, const at::Tensor& full,
                            const std::function<void(const std::string&, const at::Tensor&)>& visit, bool merge) const {
  for (const UnitParam& p : layouts_[static_cast<size_t>(unit)].params) {
    const at::Tensor weight = full.narrow(0, p.offset, p.numel).view(p.shape);
    const LoraPair* adapter = merge ? lora_.adapter_of(p.name) : nullptr;
    visit(p.name, adapter ? lora_.merged(*adapter, weight) : weight);
  }
}

bool FsdpEngine::unit_has_adapter(int64_t unit) const {
  for (const UnitParam& p : layouts_[static_cast<size_t>(unit)].params) {
    if (lora_.adapter_of(p.name) != nullptr) return true;
  }
  return false;
}

void FsdpEngine::visit_full_parameters(const std::function<void(const std::string&, const at::Tensor&)>& visit,
                                       bool merge) {
  train_common::ResidentScope resident(placement_, OffloadSet::kParams);
  at::NoGradGuard no_grad;
  for (size_t u = 0; u < layouts_.size(); ++u) {
    const auto unit = static_cast<int64_t>(u);
    visit_unit(unit, gather_full(unit), visit, merge);
  }
}

void FsdpEngine::for_each_full_parameter(const std::function<void(const std::string&, const at::Tensor&)>& visit) {
  visit_full_parameters(visit, /*merge=*/true);
}

void FsdpEngine::for_each_full_base_parameter(const std::function<void(const std::string&, const at::Tensor&)>& visit) {
  visit_full_parameters(visit, /*merge=*/false);
}

std::vector<GathersIntoBuffers::Gather> FsdpEngine::full_parameter_gathers() const {
  std::vector<Gather> gathers;
  for (const UnitLayout& layout : layouts_) {
    Gather gather;
    gather.numel = layout.padded();
    for (const UnitParam& p : layout.params) {
      gather.names.push_back(p.name);
      gather.offsets.push_back(p.offset);
      gather.numels.push_back(p.numel);
    }
    gathers.push_back(std::move(gather));
  }
  return gathers;
}

void FsdpEngine::for_each_full_parameter_into(const std::function<at::Tensor(size_t gather)>& destination,
                                              const std::function<void(const std::string&, const at::Tensor&)>& visit) {
  train_common::ResidentScope resident(placement_, OffloadSet::kParams);
  at::NoGradGuard no_grad;
  for (size_t u = 0; u < layouts_.size(); ++u) {
    const auto unit = static_cast<int64_t>(u);
    const at::Tensor into = destination(u);
    if (into.defined()) check_destination(unit, into);
    // One rank's parameters are full already: visiting them costs no memory and no copy.
    const bool direct = into.defined() && dp_.size() > 1 && !unit_has_adapter(unit);
    visit_unit(unit, direct ? gather_into(unit, into) : gather_full(unit), visit, /*merge=*/true);
  }
}

std::vector<std::string> FsdpEngine::adapted_parameters() const {
  std::vector<std::string> names;
  for (const auto& pair : lora_.pairs()) names.push_back(pair->module + ".weight");
  return names;
}

at::Tensor FsdpEngine::merged_parameter(const std::string& name, const at::Tensor& base) {
  const LoraPair* adapter = lora_.adapter_of(name);
  if (adapter == nullptr) throw ValueError("fsdp: merged_parameter('" + name + "'): no LoRA adapter on it");
  return lora_.merged(*adapter, base);
}

std::vector<train_common::ShardState*> FsdpEngine::shard_states() {
  std::vector<train_common::ShardState*> states;
  for (train_common::ShardState& state : shards_) states.push_back(&state);
  return states;
}

void FsdpEngine::offload(OffloadSet what) { placement_.offload(what); }

void FsdpEngine::reload(OffloadSet what) { placement_.reload(what); }

TrainMemory FsdpEngine::memory() const {
  TrainMemory memory;
  for (const train_common::ShardState& state : shards_) state.count_bytes(memory);
  memory.param_bytes += lora_.param_bytes();
  memory.grad_bytes += lora_.param_bytes();
  memory.optimizer_bytes += lora_.optimizer_bytes();
  return memory;
}

void FsdpEngine::zero_grads() {
  grad_cleared_.assign(shards_.size(), true);
  if (lora_.enabled()) lora_.zero_grads();
}

}  // namespace rlcore::train_fsdp
