// The "reward_model" worker role: a frozen train engine with a value head
// loaded from a sequence-classification checkpoint (verl's reward model).
#include "rlcore/core/config/run_config.h"
#include "rlcore/core/workers/roles.h"
#include "workers/worker_common.h"
#include "workers/worker_contract.h"

namespace rlcore::workers {
namespace {

class RewardModelWorker {
 public:
  RewardModelWorker(const Registry& components, const runtime::RoleContext& context) {
    config_ = config::run_config_schema().parse(role_config(context)).reward.reward_model;
    // The engine's own keys keep their defaults: a frozen forward needs none of them.
    EngineRequest request{config_.strategy, ConfigNode::parse("{}", "reward.reward_model"), config_.model_path};
    request.model_head = "value";
    request.trainable = false;
    engine_ = make_train_engine(components, context, request);
  }

  void register_methods(runtime::RoleMethods& methods) {
    methods.add(reward_model_methods::kComputeRmScore.name, runtime::DispatchMode::kDpCompute,
                handle(reward_model_methods::kComputeRmScore, [this](const Batch& batch, const NoArgs&) {
                  ForwardOptions options;
                  options.micro_batching = {config_.micro_batch_size_per_gpu, false, 0};
                  Batch out(batch.size());
                  // values[:, 0] reads the hidden state of the last sequence token (see kComputeRmScore).
                  out.set(kRmScores, engine_->forward(batch, options).values.select(1, 0).contiguous());
                  return Replied<NoReply>{out, {}};
                }));
  }

 private:
  config::RewardModelConfig config_;
  std::shared_ptr<TrainEngine> engine_;
};

}  // namespace

void add_reward_model_role(runtime::RoleRegistry& roles, const Registry& components) {
  add_role<RewardModelWorker>(roles, role_types::kRewardModel, components);
}

}  // namespace rlcore::workers
