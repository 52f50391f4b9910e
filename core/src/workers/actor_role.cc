// The "actor_rollout_ref" worker role: the actor's train engine, the rollout's
// inference engine and the frozen reference, colocated in one process so the
// weights move from training to generation without leaving it.
#include <algorithm>
#include <map>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include "rlcore/capabilities.h"
#include "rlcore/comm_context.h"
#include "rlcore/core/workers/roles.h"
#include "rlcore/core/config/engine_options.h"
#include "rlcore/device.h"
#include "rlcore/error.h"
#include "rlcore/fault_point.h"
#include "rlcore/model/exact_forward.h"
#include "rlcore/inference_engine.h"
#include "rlcore/sharding_manager.h"
#include "workers/losses.h"
#include "workers/parallel.h"
#include "workers/rollout_generation.h"
#include "workers/sequences.h"
#include "workers/worker_common.h"
#include "workers/weight_transfer.h"
#include "workers/worker_contract.h"

namespace rlcore::workers {
namespace {

MicroBatching micro_batching(int64_t micro_batch_size, bool dynamic, int64_t max_token_len) {
  return MicroBatching{micro_batch_size, dynamic, max_token_len};
}

class ActorRolloutRef {
 public:
  ActorRolloutRef(const Registry& components, const runtime::RoleContext& context)
      : context_(context), device_(worker_device(context)) {
    const ConfigNode tree = role_config(context);
    const ConfigNode section = tree["actor_rollout_ref"];
    config_ = config::actor_rollout_ref_schema().parse(section);
    // Before any engine: the trainer's forward and the rollout's both read it.
    model::set_exact_forward(config_.rollout.exact_logprobs);
    const std::string model_path = context.options.value(role_options::kModelPath, config_.model.path);
    const int64_t total_steps = context.options.value(role_options::kTotalSteps, int64_t{0});

    EngineRequest actor{config_.actor.strategy, config::actor_engine_options(config_), model_path};
    actor.total_training_steps = total_steps;
    actor_ = make_train_engine(components, context, actor);
    if (context.options.value(role_options::kWithRef, false)) {
      EngineRequest ref{config_.ref.strategy, config::ref_engine_options(config_), model_path};
      ref.trainable = false;
      ref_ = make_train_engine(components, context, ref);
    }
    if (context.options.value(role_options::kWithRollout, true)) {
      ComponentContext rollout_context;
      rollout_context.device = device_;
      rollout_context.model_path = model_path;
      if (context.comm != nullptr) {
        rollout_comm_ = std::make_unique<CommContext>(
            rollout_comm(*context.comm, rollout_tensor_parallel_size(config_, components)));
        rollout_context.comm = rollout_comm_.get();
      }
      rollout_ =
          components.create<InferenceEngine>(config_.rollout.name, config_.rollout.engine_options, rollout_context);
      layout_ = rollout_layout(rollout_context.comm);
      attach_sharding_manager(components, rollout_context);
      if (config_.rollout.enable_rollout_routing_replay) routing_recorder().set_record_routing(true);
    }
    loss_ = make_actor_loss(components, section["actor"]);
  }

  void register_methods(runtime::RoleMethods& methods) {
    // Every rank of a rollout TP group generates the same prompts (mesh_compute
    // sends each group one shard); with tp 1 this is dp_compute over all ranks.
    methods.set_mesh_rank(kRolloutMesh, rollout_mesh_rank(context_, layout_));
    methods.add_mesh(
        actor_methods::kGenerate.name, kRolloutMesh,
        handle(actor_methods::kGenerate, [this](const Batch& b, const GenerateArgs& a) { return generate(b, a); }));
    // Every rank of a model-parallel replica (train-megatron's tp x pp group)
    // gets the replica's rows; without one this is dp_compute over all ranks.
    methods.set_mesh_rank(kTrainMesh, train_mesh_rank(context_.comm, context_.rank, context_.world_size));
    methods.add_mesh(actor_methods::kComputeLogProb.name, kTrainMesh,
                     handle(actor_methods::kComputeLogProb,
                            [this](const Batch& b, const LogProbArgs& a) { return compute_log_prob(b, a); }));
    methods.add_mesh(actor_methods::kComputeRefLogProb.name, kTrainMesh,
                     handle(actor_methods::kComputeRefLogProb,
                            [this](const Batch& b, const LogProbArgs& a) { return compute_ref_log_prob(b, a); }));
    methods.add_mesh(actor_methods::kUpdateActor.name, kTrainMesh,
                     handle(actor_methods::kUpdateActor,
                            [this](const Batch& b, const UpdateActorArgs& a) { return update_actor(b, a); }));
    methods.add_mesh(actor_methods::kSftStep.name, kTrainMesh,
                     handle(actor_methods::kSftStep, [this](const Batch& b, const NoArgs&) { return sft_step(b); }));
    methods.add(
        actor_methods::kJoinBridge.name, runtime::DispatchMode::kOneToAll,
        handle(actor_methods::kJoinBridge, [this](const Batch&, const JoinBridgeArgs& a) { return join_bridge(a); }));
    methods.add(actor_methods::kSendWeights.name, runtime::DispatchMode::kOneToAll,
                handle(actor_methods::kSendWeights,
                       [this](const Batch&, const SendWeightsArgs& a) { return send_weights(a); }));
    methods.add(
        actor_methods::kSyncWeights.name, runtime::DispatchMode::kOneToAll,
        handle(actor_methods::kSyncWeights, [this](const Batch&, const VersionArgs& a) { return sync_weights(a); }));
    methods.add(actor_methods::kSaveCheckpoint.name, runtime::DispatchMode::kOneToAll,
                handle(actor_methods::kSaveCheckpoint, [this](const Batch&, const DirArgs& a) {
                  actor_->save_checkpoint(a.dir);
                  return Replied<NoReply>{};
                }));
    methods.add(actor_methods::kLoadCheckpoint.name, runtime::DispatchMode::kOneToAll,
                handle(actor_methods::kLoadCheckpoint, [this](const Batch&, const DirArgs& a) {
                  actor_->load_checkpoint(a.dir);
                  return Replied<LoadCheckpointReply>{Batch(), {actor_->step()}};
                }));
    methods.add(actor_methods::kExportHf.name, runtime::DispatchMode::kOneToAll,
                handle(actor_methods::kExportHf, [this](const Batch&, const DirArgs& a) {
                  actor_->export_hf(a.dir);
                  return Replied<NoReply>{};
                }));
    methods.add(actor_methods::kMemory.name, runtime::DispatchMode::kOneToAll,
                handle(actor_methods::kMemory, [this](const Batch&, const NoArgs&) {
                  const TrainMemory memory = actor_->memory();
                  return Replied<MemoryReply>{
                      Batch(), {memory.param_bytes, memory.grad_bytes, memory.optimizer_bytes, memory.host_bytes}};
                }));
  }

 private:
  ActorLossSettings make_actor_loss(const Registry& components, const ConfigNode& actor_section) const {
    const config::ActorConfig& actor = config_.actor;
    ActorLossSettings settings;
    settings.policy_loss_name = actor.policy_loss.loss_mode;
    settings.policy_loss = components.create<PolicyLoss>(actor.policy_loss.loss_mode, actor.policy_loss.options);
    settings.policy.clip_ratio = actor.clip_ratio;
    if (actor_section.has("clip_ratio_low")) settings.policy.clip_ratio_low = actor.clip_ratio_low;
    if (actor_section.has("clip_ratio_high")) settings.policy.clip_ratio_high = actor.clip_ratio_high;
    settings.policy.clip_ratio_c = actor.clip_ratio_c;
    settings.policy.tau_pos = actor.tau_pos;
    settings.policy.tau_neg = actor.tau_neg;
    settings.policy.aggregation.mode = actor.loss_agg_mode;
    settings.entropy_coeff = actor.entropy_coeff;
    settings.use_kl_loss = actor.use_kl_loss;
    settings.kl_loss_coef = actor.kl_loss_coef;
    settings.kl_loss_type = actor.kl_loss_type;
    return settings;
  }

  Replied<GenerateReply> generate(const Batch& prompts, const GenerateArgs& a) {
    require(rollout_ != nullptr, actor_methods::kGenerate.qualified());
    const SamplingParams sampling = sampling_params(a.sampling, a.limits, rollout_mesh_rank(context_, layout_).dp_rank);
    if (a.sampling.validation) fault_point("actor.validate");
    GenerationOutput generated;
    {
      fault_point("actor.swap_to_rollout");
      RolloutScope scope(*sharding_manager_, version_);
      swaps_.add_to_rollout(scope.entered());
      generated = rollout_->generate(unpad_prompts(prompts), sampling);
      fault_point("actor.swap_to_train");
      swaps_.add_to_train(scope.finish());
    }
    Replied<GenerateReply> out = generation_result(prompts, generated, sampling, a.limits.pad_token_id, *rollout_);
    if (config_.rollout.enable_rollout_routing_replay) {
      out.batch.set(columns::kRoutedExperts, pack_routing(routing_recorder().take_routing(), out.batch));
    }
    return out;
  }

  RecordsRouting& routing_recorder() {
    auto* recorder = capability<RecordsRouting>(*rollout_);
    if (recorder == nullptr) {
      throw ConfigError("key actor_rollout_ref.rollout.enable_rollout_routing_replay: the inference engine '" +
                        config_.rollout.name + "' cannot record a routing");
    }
    return *recorder;
  }

  // Routing replay on the actor's engine for one call, reset however the call ends.
  class RoutingReplayScope {
   public:
    RoutingReplayScope(TrainEngine& engine, const std::string& strategy, bool replay, bool record)
        : engine_(replay || record ? capability<ReplaysRouting>(engine) : nullptr) {
      if ((replay || record) && engine_ == nullptr) {
        throw ConfigError("key actor_rollout_ref.actor.router_replay.mode: the train engine '" + strategy +
                          "' cannot replay a routing");
      }
      if (engine_ != nullptr) engine_->set_routing_replay(replay, record);
    }
    ~RoutingReplayScope() {
      if (engine_ != nullptr) engine_->set_routing_replay(false, false);
    }
    RoutingReplayScope(const RoutingReplayScope&) = delete;
    RoutingReplayScope& operator=(const RoutingReplayScope&) = delete;
    ReplaysRouting* engine() const { return engine_; }

   private:
    ReplaysRouting* engine_;
  };

  // A standalone rollout pool (docs/async.md): rank 0 joins the bridge as its
  // rank 0; the other ranks have no part in it.
  Replied<NoReply> join_bridge(const JoinBridgeArgs& a) {
    if (context_.rank != 0) return {};
    if (!context_.join_group)
      throw ConfigError("a standalone rollout pool needs process groups (runtime.process_groups)");
    bridge_ = std::make_unique<CommGroup>(context_.join_group(a.bridge, 0, a.bridge_size));
    return {};
  }

  // Every rank gathers the full parameters; rank 0 sends them over the bridge.
  Replied<WeightTransferStats> send_weights(const SendWeightsArgs& a) {
    if (context_.rank == 0 && bridge_ == nullptr) {
      throw ValueError(actor_methods::kSendWeights.qualified() + ": rank 0 has not joined the bridge");
    }
    fault_point("actor.send_weights");
    const WeightTransferStats stats = workers::send_weights(
        [this](const auto& visit) { actor_->for_each_full_parameter(visit); }, bridge_.get(), a.bucket_bytes);
    return {Batch(), stats};
  }

  Replied<NoReply> compute_log_prob(const Batch& batch, const LogProbArgs& a) {
    ForwardOptions options;
    options.temperature = a.temperature;
    options.entropy = a.entropy;
    const config::RolloutConfig& rollout = config_.rollout;
    options.micro_batching = micro_batching(rollout.log_prob_micro_batch_size_per_gpu, rollout.log_prob_use_dynamic_bsz,
                                            rollout.log_prob_max_token_len_per_gpu);
    Batch out(batch.size());
    ModelOutput output;
    const RoutingReplayScope routing(*actor_, config_.actor.strategy, a.replay_routing, a.record_routing);
    if (config_.actor.calculate_sum_pi_squared) {
      auto* engine = capability<ComputesSumPiSquared>(*actor_);
      if (engine == nullptr) {
        throw ConfigError("key actor_rollout_ref.actor.calculate_sum_pi_squared: the train engine '" +
                          config_.actor.strategy + "' cannot compute sum_pi_squared");
      }
      at::Tensor sum_pi_squared;
      output = engine->forward_with_sum_pi_squared(batch, options, sum_pi_squared);
      out.set(columns::kSumPiSquared, sum_pi_squared);
    } else {
      output = actor_->forward(batch, options);
    }
    out.set(columns::kOldLogProbs, output.log_prob);
    if (output.entropy.defined()) out.set(columns::kEntropys, output.entropy);
    if (a.record_routing) out.set(columns::kRoutedExperts, routing.engine()->take_routing());
    return {out, {}};
  }

  Replied<NoReply> compute_ref_log_prob(const Batch& batch, const LogProbArgs& a) {
    require(ref_ != nullptr, actor_methods::kComputeRefLogProb.qualified());
    ForwardOptions options;
    options.temperature = a.temperature;
    const config::RefConfig& ref = config_.ref;
    options.micro_batching = micro_batching(ref.log_prob_micro_batch_size_per_gpu, ref.log_prob_use_dynamic_bsz,
                                            ref.log_prob_max_token_len_per_gpu);
    Batch out(batch.size());
    out.set(columns::kRefLogProb, ref_->forward(batch, options).log_prob);
    return {out, {}};
  }

  ForwardOptions update_options(double temperature) const {
    ForwardOptions options;
    options.temperature = temperature;
    options.entropy = config_.actor.entropy_coeff != 0.0;
    options.micro_batching = micro_batching(config_.actor.ppo_micro_batch_size_per_gpu, config_.actor.use_dynamic_bsz,
                                            config_.actor.ppo_max_token_len_per_gpu);
    return options;
  }

  Replied<UpdateReply> update_actor(const Batch& batch, const UpdateActorArgs& a) {
    const RoutingReplayScope routing(*actor_, config_.actor.strategy, a.replay_routing, false);
    return {Batch(),
            run_updates(*actor_, batch, a.mini_batch_rows, a.epochs, update_options(a.temperature), actor_loss(loss_))};
  }

  Replied<UpdateReply> sft_step(const Batch& batch) {
    return {Batch(), update_reply(actor_->train_step(batch, update_options(1.0), sft_loss()).metrics)};
  }

  // The train <-> rollout switch around every generate() call, with the
  // weight version set by the last sync_weights.
  void attach_sharding_manager(const Registry& components, const ComponentContext& context) {
    const config::HybridEngineConfig& hybrid = config_.hybrid_engine;
    sharding_manager_ = components.create<ShardingManager>(config_.rollout.sharding_manager, hybrid.options, context);
    HybridEngines engines;
    engines.train = actor_;
    engines.rollout = rollout_;
    engines.adaptor =
        components.create<WeightAdaptor>(config::weight_adaptor_for(config_, components), ConfigNode(), context);
    engines.offloader = components.create<Offloader>(hybrid.offloader, ConfigNode(), context);
    engines.layout = layout_;
    sharding_manager_->attach(std::move(engines));
  }

  // Sets the version the next swaps carry and returns the stats of the swaps
  // since the previous call (summed; peak: the largest).
  Replied<SyncWeightsReply> sync_weights(const VersionArgs& a) {
    require(rollout_ != nullptr, actor_methods::kSyncWeights.qualified());
    version_ = a.version;
    SyncWeightsReply reply;
    reply.version = version_;
    reply.swaps = swaps_;
    if (!swaps_.measured_per_swap && !warned_peak_not_reset_) {
      spdlog::warn(
          "rank {}: the memory peak could not be reset before a swap (/proc/self/clear_refs is not "
          "writable here); memory/peak_swap_bytes is the peak since the process started",
          context_.rank);
      warned_peak_not_reset_ = true;
    }
    // This worker's device memory now, measured (rlcore/device.h).
    const DeviceMemoryStats memory = device_memory_stats(at::Device(device_));
    reply.allocated_bytes = memory.allocated;
    reply.reserved_bytes = memory.reserved;
    reply.rss_bytes = process_rss_bytes();
    swaps_ = SwapTotals();
    return {Batch(), reply};
  }

  void require(bool present, const std::string& method) const {
    if (!present) throw ValueError(method + ": this worker was started without that engine");
  }

  static constexpr const char* kRolloutMesh = "rollout";
  static constexpr const char* kTrainMesh = "train";

  runtime::RoleContext context_;
  std::string device_;  // trainer.device as this worker resolved it ("cpu", "cuda:1")
  config::ActorRolloutRefConfig config_;
  RolloutLayout layout_;
  std::unique_ptr<CommContext> rollout_comm_;  // the pool's groups, plus the rollout's TP group
  std::shared_ptr<TrainEngine> actor_;
  std::shared_ptr<TrainEngine> ref_;
  std::shared_ptr<InferenceEngine> rollout_;
  std::shared_ptr<ShardingManager> sharding_manager_;
  std::unique_ptr<CommGroup> bridge_;  // rank 0, with a standalone rollout pool
  int64_t version_ = 0;                // what the next swap carries: set by sync_weights
  SwapTotals swaps_;
  bool warned_peak_not_reset_ = false;
  ActorLossSettings loss_;
};

}  // namespace

void add_actor_rollout_ref_role(runtime::RoleRegistry& roles, const Registry& components) {
  add_role<ActorRolloutRef>(roles, role_types::kActor, components);
}

}  // namespace rlcore::workers
