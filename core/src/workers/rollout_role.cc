// The "rollout" worker role: a standalone rollout pool (docs/async.md). The
// inference engine alone, on workers of its own, generating while the actor
// trains; its weights arrive from the actor's rank 0 over the bridge
// (trainer/weight_transfer.h), versioned, between generations.
#include <memory>

#include "rlcore/capabilities.h"
#include "rlcore/core/workers/roles.h"
#include "rlcore/core/config/engine_options.h"
#include "rlcore/error.h"
#include "rlcore/fault_point.h"
#include "rlcore/model/exact_forward.h"
#include "rlcore/generation_request.h"
#include "rlcore/inference_engine.h"
#include "workers/parallel.h"
#include "workers/rollout_generation.h"
#include "workers/sequences.h"
#include "workers/weight_transfer.h"
#include "workers/worker_common.h"
#include "workers/worker_contract.h"

namespace rlcore::workers {
namespace {

class StandaloneRollout {
 public:
  StandaloneRollout(const Registry& components, const runtime::RoleContext& context)
      : context_(context), device_(worker_device(context)) {
    config_ = config::actor_rollout_ref_schema().parse(role_config(context)["actor_rollout_ref"]);
    model::set_exact_forward(config_.rollout.exact_logprobs);
    ComponentContext engine_context;
    engine_context.device = device_;
    engine_context.model_path = context.options.value(role_options::kModelPath, config_.model.path);
    if (context.comm != nullptr) {
      comm_ =
          std::make_unique<CommContext>(rollout_comm(*context.comm, rollout_tensor_parallel_size(config_, components)));
      engine_context.comm = comm_.get();
    }
    engine_ = components.create<InferenceEngine>(config_.rollout.name, config_.rollout.engine_options, engine_context);
    adaptor_ =
        components.create<WeightAdaptor>(config::weight_adaptor_for(config_, components), ConfigNode(), engine_context);
    layout_ = rollout_layout(engine_context.comm);
  }

  void register_methods(runtime::RoleMethods& methods) {
    methods.set_mesh_rank(kRolloutMesh, rollout_mesh_rank(context_, layout_));
    methods.add_mesh(
        rollout_methods::kGenerate.name, kRolloutMesh,
        handle(rollout_methods::kGenerate, [this](const Batch& b, const GenerateArgs& a) { return generate(b, a); }));
    methods.add(
        rollout_methods::kJoinBridge.name, runtime::DispatchMode::kOneToAll,
        handle(rollout_methods::kJoinBridge, [this](const Batch&, const JoinBridgeArgs& a) { return join_bridge(a); }));
    methods.add(rollout_methods::kReceiveWeights.name, runtime::DispatchMode::kOneToAll,
                handle(rollout_methods::kReceiveWeights,
                       [this](const Batch&, const VersionArgs& a) { return receive_weights(a); }));
    methods.add(rollout_methods::kStream.name, runtime::DispatchMode::kAllToAll,
                handle(rollout_methods::kStream, [this](const Batch& b, const StreamArgs& a) { return stream(b, a); }));
  }

 private:
  Replied<GenerateReply> generate(const Batch& prompts, const GenerateArgs& a) {
    const SamplingParams sampling = sampling_params(a.sampling, a.limits, rollout_mesh_rank(context_, layout_).dp_rank);
    if (a.sampling.validation) fault_point("rollout.validate");
    fault_point("rollout.generate");
    const GenerationOutput generated = engine_->generate(unpad_prompts(prompts), sampling);
    return generation_result(prompts, generated, sampling, a.limits.pad_token_id, *engine_);
  }

  // Requests stay in the engine between calls: a weight update between two
  // calls reaches the requests in flight (their later tokens carry its version).
  Replied<StreamStatus> stream(const Batch& requests, const StreamArgs& a) {
    auto* engine = capability<GeneratesRequests>(*engine_);
    if (engine == nullptr) {
      throw ConfigError(
          "async_training.mode fully_async needs a rollout engine that generates request by request "
          "(capability requests: infer-native); actor_rollout_ref.rollout.name is '" +
          config_.rollout.name + "'");
    }
    fault_point("rollout.stream");
    const SamplingParams sampling = sampling_params(a.sampling, a.limits, 0);
    if (requests.size() > 0) {
      const std::vector<std::vector<int32_t>> prompts = unpad_prompts(requests);
      const at::Tensor ids = requests.tensor(kRequestId).to(at::kLong).contiguous();
      const at::Tensor seeds = requests.tensor(kRequestSeed).to(at::kLong).contiguous();
      for (int64_t i = 0; i < requests.size(); ++i) {
        GenerationRequest request;
        request.id = std::to_string(ids.data_ptr<int64_t>()[i]);
        request.prompt_ids = prompts[static_cast<size_t>(i)];
        request.sampling = sampling;
        request.sampling.seed = seeds.data_ptr<int64_t>()[i];
        engine->submit(std::move(request));
      }
    }
    StreamReply reply;
    for (int64_t s = 0; s < a.decode_steps; ++s) {
      const GenerationLoad load = engine->load();
      if (load.running + load.waiting == 0) break;
      for (RequestOutput& done : engine->step().finished) {
        reply.finished.push_back(StreamReply::Finished{std::stoll(done.id), std::move(done.generated),
                                                       done.finish_reason == FinishReason::kStop});
      }
    }
    const GenerationLoad load = engine->load();
    reply.unfinished = load.running + load.waiting;
    return {reply.to_batch(), {reply.unfinished}};
  }

  // Rollout rank r is the bridge's rank 1 + r (rank 0: the actor's rank 0).
  Replied<NoReply> join_bridge(const JoinBridgeArgs& a) {
    if (!context_.join_group)
      throw ConfigError("a standalone rollout pool needs process groups (runtime.process_groups)");
    bridge_ = std::make_unique<CommGroup>(context_.join_group(a.bridge, 1 + context_.rank, a.bridge_size));
    return {};
  }

  Replied<WeightTransferStats> receive_weights(const VersionArgs& a) {
    if (bridge_ == nullptr) {
      throw ValueError(rollout_methods::kReceiveWeights.qualified() + ": rank " + std::to_string(context_.rank) +
                       " has not joined the bridge");
    }
    fault_point("rollout.receive_weights");
    return {Batch(), workers::receive_weights(*engine_, *adaptor_, layout_, *bridge_, at::Device(device_), a.version)};
  }

  static constexpr const char* kRolloutMesh = "rollout";

  runtime::RoleContext context_;
  std::string device_;
  config::ActorRolloutRefConfig config_;
  std::unique_ptr<CommContext> comm_;  // the pool's groups, plus the rollout's TP group
  std::shared_ptr<InferenceEngine> engine_;
  std::shared_ptr<WeightAdaptor> adaptor_;
  RolloutLayout layout_;
  std::unique_ptr<CommGroup> bridge_;
};

}  // namespace

void add_rollout_role(runtime::RoleRegistry& roles, const Registry& components) {
  add_role<StandaloneRollout>(roles, role_types::kRollout, components);
}

}  // namespace rlcore::workers
