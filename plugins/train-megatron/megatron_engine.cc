// MegatronEngine: construction (groups, stage, shards of the checkpoint),
// compute weights, gathering full parameters, shards, offload and memory.
#include "megatron_engine.h"

#include <ATen/ATen.h>

#include "train-common/engine_device.h"
#include "rlcore/device.h"
#include "rlcore/error.h"
#include "rlcore/model/architecture.h"
#include "rlcore/safetensors/safetensors.h"

namespace rlcore::train_megatron {
namespace {

namespace mg = model::megatron;

// Megatron's layout has no place for Gemma 2's sandwich norms, and its stage
// model applies one attention mask to every layer (all sliding or none).
bool megatron_builds(const model::Architecture& arch) {
  return !arch.layers.gemma_norms && !arch.layers.per_layer_sliding;
}

void check_supported(const ComponentContext& context, const model::ModelConfig& config,
                     const MegatronConfigOptions& options) {
  if (context.model_head != "lm") {
    throw ConfigError("megatron: model_head '" + context.model_head +
                      "' is not supported (the megatron engine has the causal-LM head only; use strategy fsdp for a "
                      "critic)");
  }
  if (!megatron_builds(config.architecture())) {
    throw ConfigError("megatron: model_type '" + config.model_type + "' is not supported by the megatron engine (" +
                      model::architecture_names(megatron_builds) + "); use strategy fsdp");
  }
  try {
    mg::validate_parallel(config, options.tensor_model_parallel_size, options.pipeline_model_parallel_size);
  } catch (const ValueError& e) {
    throw ConfigError(std::string("megatron: ") + e.what());
  }
}

// The engine's groups, after checking what expert parallelism needs of the model.
ParallelGroups engine_groups(const ComponentContext& context, const model::ModelConfig& config,
                             const MegatronConfigOptions& options) {
  const int64_t ep = options.expert_model_parallel_size;
  if (ep > 1 && (!config.is_moe() || config.num_experts % ep != 0)) {
    throw ConfigError("megatron.expert_model_parallel_size = " + std::to_string(ep) + " must divide num_experts (" +
                      std::to_string(config.num_experts) + ")" +
                      (config.is_moe() ? "" : ": model_type '" + config.model_type + "' has no experts"));
  }
  return parallel_groups(context.comm, options.tensor_model_parallel_size, options.pipeline_model_parallel_size, ep);
}

}  // namespace

MegatronEngine::MegatronEngine(const MegatronOptions& options, const ComponentContext& context)
    : options_(options),
      model_path_(context.model_path),
      trainable_(context.trainable),
      device_(train_common::engine_device(context, "megatron")),
      placement_(device_, [this] { return shard_states(); }),
      compute_dtype_(options.megatron.dtype == "bfloat16" ? at::kBFloat16 : at::kFloat),
      config_(model::ModelConfig::from_checkpoint_dir(context.model_path, "megatron")),
      groups_(engine_groups(context, config_, options.megatron)),
      stage_(config_, groups_.tp, groups_.ep),
      skeleton_(config_, model::ModelHead::kCausalLm, at::TensorOptions().device(at::kMeta).dtype(compute_dtype_)),
      schedule_(train_common::make_lr_schedule(options.optim, context.total_training_steps)) {
  check_supported(context, config_, options.megatron);
  check_dtype_supported(device_, compute_dtype_, "megatron.dtype");
  if (!device_.is_cpu()) skeleton_.rotary = model::RotaryEmbedding(config_, device_);
  std::tie(first_layer_, end_layer_) =
      mg::pp_layer_range(config_.num_hidden_layers, groups_.pp.rank(), groups_.pp.size());
  load_initial_weights(model_path_);
  OffloadSet parked = OffloadSet::kNone;
  if (options_.megatron.param_offload) parked = parked | OffloadSet::kParams;
  if (options_.megatron.grad_offload && trainable_) parked = parked | OffloadSet::kGrads;
  if (options_.megatron.optimizer_offload && trainable_) parked = parked | OffloadSet::kOptimizer;
  offload(parked);
}

int64_t MegatronEngine::owner_stage(const mg::MegatronParam& param) const {
  if (param.layer >= 0) {
    for (int64_t stage = 0; stage < groups_.pp.size(); ++stage) {
      const auto [begin, end] = mg::pp_layer_range(config_.num_hidden_layers, stage, groups_.pp.size());
      if (param.layer >= begin && param.layer < end) return stage;
    }
  }
  return param.name == "embedding.word_embeddings.weight" ? 0 : groups_.pp.size() - 1;
}

int64_t MegatronEngine::owner_ep_rank(const mg::MegatronParam& param) const {
  return param.expert < 0 ? groups_.ep.rank() : param.expert / (config_.num_experts / groups_.ep.size());
}

bool MegatronEngine::holds(const mg::MegatronParam& param) const {
  return owner_stage(param) == groups_.pp.rank() && owner_ep_rank(param) == groups_.ep.rank();
}

void MegatronEngine::load_initial_weights(const std::string& model_path) {
  const SafetensorsCheckpoint checkpoint(model_path);
  const at::TensorOptions fp32 = at::TensorOptions().dtype(at::kFloat).device(device_);
  auto add = [&](const mg::MegatronParam& meta, bool tied_output) {
    std::vector<at::Tensor> hf;
    for (const std::string& name : mg::hf_sources(config_, meta.name)) {
      if (!checkpoint.contains(name))
        throw ValueError("megatron: checkpoint " + model_path + " has no tensor '" + name + "' (for " + meta.name +
                         ")");
      hf.push_back(checkpoint.view(name).to(at::kFloat));
    }
    const at::Tensor full = mg::from_hf(config_, meta.name, hf);
    LocalParam local;
    local.meta = meta;
    local.state.param.device() =
        mg::tp_shard(config_, meta, full, groups_.tp.rank(), groups_.tp.size()).to(fp32).contiguous().clone();
    if (trainable_) {
      local.state.grad.device() = at::zeros_like(local.state.param.device());
      local.state.exp_avg.device() = at::zeros_like(local.state.param.device());
      local.state.exp_avg_sq.device() = at::zeros_like(local.state.param.device());
    }
    local.tied_output = tied_output;
    local.expert = meta.expert >= 0;
    local.counted_in_norm = !tied_output && (meta.split != model::TpSplit::kReplicated || groups_.tp.rank() == 0);
    if (!tied_output) index_[meta.name] = params_.size();
    params_.push_back(std::move(local));
  };
  for (const mg::MegatronParam& meta : mg::megatron_parameters(config_)) {
    if (holds(meta)) add(meta, false);
  }
  // Tied embeddings across stages: the last stage keeps its own output copy
  // whose gradient is summed with stage 0's every step (Megatron's embedding group).
  if (config_.tie_word_embeddings && groups_.pp.size() > 1 && groups_.last_stage())
    add(mg::megatron_parameter(config_, "embedding.word_embeddings.weight"), true);
}

std::vector<at::Tensor> MegatronEngine::compute_weights(bool requires_grad) const {
  std::vector<at::Tensor> weights;
  for (const LocalParam& p : params_) {
    const at::Tensor& master = p.state.param.device();
    if (!master.defined()) throw ValueError("megatron: parameter '" + p.meta.name + "' is offloaded");
    at::Tensor w = master.detach().to(compute_dtype_);
    if (requires_grad) w.requires_grad_(true);
    weights.push_back(w);
  }
  return weights;
}

at::Tensor MegatronEngine::weight(const std::vector<at::Tensor>& weights, const std::string& name) const {
  auto found = index_.find(name);
  return found == index_.end() ? at::Tensor() : weights[found->second];
}

LayerWeights MegatronEngine::layer_weights(const std::vector<at::Tensor>& weights, int64_t layer) const {
  const std::string p = "decoder.layers." + std::to_string(layer) + ".";
  LayerWeights w;
  w.input_norm = weight(weights, p + "input_layernorm.weight");
  w.qkv_weight = weight(weights, p + "self_attention.linear_qkv.weight");
  w.qkv_bias = weight(weights, p + "self_attention.linear_qkv.bias");
  w.q_norm = weight(weights, p + "self_attention.q_layernorm.weight");
  w.k_norm = weight(weights, p + "self_attention.k_layernorm.weight");
  w.proj_weight = weight(weights, p + "self_attention.linear_proj.weight");
  w.proj_bias = weight(weights, p + "self_attention.linear_proj.bias");
  if (config_.latent_attention()) {
    w.q_proj = weight(weights, p + "self_attention.linear_q_proj.weight");
    w.q_down = weight(weights, p + "self_attention.linear_q_down_proj.weight");
    w.q_down_bias = weight(weights, p + "self_attention.linear_q_down_proj.bias");
    w.q_latent_norm = weight(weights, p + "self_attention.q_layernorm.weight");
    w.q_up = weight(weights, p + "self_attention.linear_q_up_proj.weight");
    w.kv_down = weight(weights, p + "self_attention.linear_kv_down_proj.weight");
    w.kv_down_bias = weight(weights, p + "self_attention.linear_kv_down_proj.bias");
    w.kv_latent_norm = weight(weights, p + "self_attention.kv_layernorm.weight");
    w.kv_up = weight(weights, p + "self_attention.linear_kv_up_proj.weight");
    w.q_norm = at::Tensor();  // the latent q norm above, not qwen3's per-head one
  }
  w.pre_mlp_norm = weight(weights, p + "pre_mlp_layernorm.weight");
  w.fc1_weight = weight(weights, p + "mlp.linear_fc1.weight");
  w.fc1_bias = weight(weights, p + "mlp.linear_fc1.bias");
  w.fc2_weight = weight(weights, p + "mlp.linear_fc2.weight");
  w.fc2_bias = weight(weights, p + "mlp.linear_fc2.bias");
  if (!config_.layer_is_sparse(layer)) return w;
  w.router = weight(weights, p + "mlp.router.weight");
  w.router_bias = weight(weights, p + "mlp.router.expert_bias");
  w.shared_fc1 = weight(weights, p + "mlp.shared_experts.linear_fc1.weight");
  w.shared_fc2 = weight(weights, p + "mlp.shared_experts.linear_fc2.weight");
  const int64_t local = config_.num_experts / groups_.ep.size();
  for (int64_t e = groups_.ep.rank() * local; e < (groups_.ep.rank() + 1) * local; ++e) {
    const std::string expert = p + "mlp.experts.local_experts." + std::to_string(e) + ".";
    w.expert_fc1.push_back(weight(weights, expert + "linear_fc1.weight"));
    w.expert_fc2.push_back(weight(weights, expert + "linear_fc2.weight"));
  }
  return w;
}

at::Tensor MegatronEngine::output_weight(const std::vector<at::Tensor>& weights) const {
  if (!config_.tie_word_embeddings) return weight(weights, "output_layer.weight");
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].tied_output) return weights[i];
  return weight(weights, "embedding.word_embeddings.weight");  // one stage: the embedding itself
}

at::Tensor MegatronEngine::gather_full(const mg::MegatronParam& param,
                                       const std::function<const at::Tensor&(const LocalParam&)>& part) const {
  const int64_t owner = owner_stage(param);
  const at::TensorOptions fp32 = at::TensorOptions().dtype(at::kFloat).device(device_);
  at::Tensor full;
  if (owner == groups_.pp.rank() && holds(param)) {
    const at::Tensor& local = part(params_[index_.at(param.name)]);
    if (!local.defined()) throw ValueError("megatron: '" + param.name + "' is offloaded; reload it first");
    std::vector<at::Tensor> shards = {local.contiguous()};
    if (groups_.tp.size() > 1 && param.split != model::TpSplit::kReplicated)
      shards = groups_.tp.all_gather(shards.front());
    full = mg::merge_tp_shards(config_, param, shards).contiguous();
  } else {
    full = at::empty(param.shape, fp32);
  }
  // An expert lives on one rank of the ep group (inside the owning stage).
  if (param.expert >= 0 && owner == groups_.pp.rank() && groups_.ep.size() > 1)
    groups_.ep.broadcast(full, owner_ep_rank(param));
  if (groups_.pp.size() > 1) groups_.pp.broadcast(full, owner);
  return full;
}

void MegatronEngine::for_each_full_parameter(const std::function<void(const std::string&, const at::Tensor&)>& visit) {
  train_common::ResidentScope resident(placement_, OffloadSet::kParams);
  for (const mg::MegatronParam& param : mg::megatron_parameters(config_)) {
    const at::Tensor full =
        gather_full(param, [](const LocalParam& p) -> const at::Tensor& { return p.state.param.device(); });
    visit(param.name, full);
  }
}

std::vector<ParameterShard> MegatronEngine::parameter_shards() const {
  std::vector<ParameterShard> shards;
  for (const LocalParam& p : params_) {
    if (p.tied_output) continue;
    ParameterShard shard;
    shard.name = p.meta.name;
    shard.shape = p.meta.shape;
    shard.local = p.state.param.any().reshape(-1);
    const bool dim0 =
        p.meta.split == model::TpSplit::kColumn && p.meta.name.find(".mlp.linear_fc1.") == std::string::npos;
    if (p.meta.split == model::TpSplit::kReplicated) {
      shard.offset = 0;
    } else if (dim0) {
      shard.offset = groups_.tp.rank() * shard.local.numel();
    } else {
      shard.offset = -1;  // a dim-1 slice or [gate; up] per rank: not one contiguous range
    }
    shards.push_back(std::move(shard));
  }
  return shards;
}

std::vector<train_common::ShardState*> MegatronEngine::shard_states() {
  std::vector<train_common::ShardState*> states;
  for (LocalParam& p : params_) states.push_back(&p.state);
  return states;
}

void MegatronEngine::offload(OffloadSet what) { placement_.offload(what); }

void MegatronEngine::reload(OffloadSet what) { placement_.reload(what); }

TrainMemory MegatronEngine::memory() const {
  TrainMemory memory;
  for (const LocalParam& p : params_) p.state.count_bytes(memory);
  return memory;
}

}  // namespace rlcore::train_megatron
