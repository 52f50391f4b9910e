// The "critic" worker role: a train engine with a value head (verl's critic).
#include "rlcore/core/workers/roles.h"
#include "rlcore/core/config/engine_options.h"
#include "workers/losses.h"
#include "workers/worker_common.h"
#include "workers/worker_contract.h"

namespace rlcore::workers {
namespace {

class Critic {
 public:
  Critic(const Registry& components, const runtime::RoleContext& context) {
    const ConfigNode tree = role_config(context);
    config_ = config::critic_schema().parse(tree["critic"]);
    const std::string actor_model = tree["actor_rollout_ref"]["model"]["path"].defined()
                                        ? tree["actor_rollout_ref"]["model"]["path"].as<std::string>()
                                        : std::string();
    EngineRequest request{
        config_.strategy, config::critic_engine_options(config_),
        config_.model.path.empty() ? context.options.value(role_options::kModelPath, actor_model) : config_.model.path};
    request.model_head = "value";
    request.total_training_steps = context.options.value(role_options::kTotalSteps, int64_t{0});
    engine_ = make_train_engine(components, context, request);
  }

  void register_methods(runtime::RoleMethods& methods) {
    methods.add(critic_methods::kComputeValues.name, runtime::DispatchMode::kDpCompute,
                handle(critic_methods::kComputeValues, [this](const Batch& batch, const NoArgs&) {
                  ForwardOptions options;
                  options.micro_batching = {config_.forward_micro_batch_size_per_gpu, config_.use_dynamic_bsz,
                                            config_.ppo_max_token_len_per_gpu};
                  Batch out(batch.size());
                  out.set(columns::kValues, engine_->forward(batch, options).values);
                  return Replied<NoReply>{out, {}};
                }));
    methods.add(critic_methods::kUpdateCritic.name, runtime::DispatchMode::kDpCompute,
                handle(critic_methods::kUpdateCritic, [this](const Batch& batch, const UpdateCriticArgs& a) {
                  ForwardOptions options;
                  options.micro_batching = {config_.ppo_micro_batch_size_per_gpu, config_.use_dynamic_bsz,
                                            config_.ppo_max_token_len_per_gpu};
                  return Replied<UpdateReply>{Batch(),
                                              run_updates(*engine_, batch, a.mini_batch_rows, a.epochs, options,
                                                          critic_loss(config_.cliprange_value, config_.loss_agg_mode))};
                }));
    methods.add(critic_methods::kSaveCheckpoint.name, runtime::DispatchMode::kOneToAll,
                handle(critic_methods::kSaveCheckpoint, [this](const Batch&, const DirArgs& a) {
                  engine_->save_checkpoint(a.dir);
                  return Replied<NoReply>{};
                }));
    methods.add(critic_methods::kLoadCheckpoint.name, runtime::DispatchMode::kOneToAll,
                handle(critic_methods::kLoadCheckpoint, [this](const Batch&, const DirArgs& a) {
                  engine_->load_checkpoint(a.dir);
                  return Replied<NoReply>{};
                }));
  }

 private:
  config::CriticConfig config_;
  std::shared_ptr<TrainEngine> engine_;
};

}  // namespace

void add_critic_role(runtime::RoleRegistry& roles, const Registry& components) {
  add_role<Critic>(roles, role_types::kCritic, components);
}

}  // namespace rlcore::workers
