// Private to the core: what the trainer's worker roles share: reading the run
// config a role was given, making train engines, and the PPO update loop.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "rlcore/config_node.h"
#include "rlcore/core/runtime/role.h"
#include "rlcore/registry.h"
#include "rlcore/train_engine.h"
#include "workers/worker_contract.h"

namespace rlcore::workers {

// The run config a role was started with (role_options::kConfig).
ConfigNode role_config(const runtime::RoleContext& context);

// The device this worker's engines use: trainer.device resolved with the
// worker's local rank (a GPU is bound as the current device), as a torch
// device string ("cpu", "cuda:1").
std::string worker_device(const runtime::RoleContext& context);

// Makes a train engine on worker_device(context).
struct EngineRequest {
  std::string strategy;  // registered train_engine name
  ConfigNode options;    // the engine's keys
  std::string model_path;
  std::string model_head = "lm";
  bool trainable = true;
  int64_t total_training_steps = 0;
};
std::shared_ptr<TrainEngine> make_train_engine(const Registry& components, const runtime::RoleContext& context,
                                               const EngineRequest& request);

// The number of data-parallel ranks the role's batch is split over.
int64_t dp_size(const runtime::RoleContext& context);

// PPO-style updates of one worker's rows: `epochs` passes over consecutive
// mini-batches of `mini_batch_rows` rows, one optimizer step each. Returns the
// steps' metrics averaged (verl's reduce_metrics).
UpdateReply run_updates(TrainEngine& engine, const Batch& rows, int64_t mini_batch_rows, int64_t epochs,
                        const ForwardOptions& options, const LossFunction& loss);

// A train step's metrics as a reply: the engine's "lr" and "grad_norm"
// (TrainStepResult) apart from the loss's.
UpdateReply update_reply(std::map<std::string, double> metrics);

// Adds role type `type`: each of its workers builds a Role(components, context)
// and registers the role's methods; the role lives as long as the worker.
template <typename Role>
void add_role(runtime::RoleRegistry& roles, const char* type, const Registry& components) {
  roles.add(type, [&components](const runtime::RoleContext& context, runtime::RoleMethods& methods) {
    auto role = std::make_shared<Role>(components, context);
    role->register_methods(methods);
    return std::static_pointer_cast<void>(role);
  });
}

// The role types (trainer/actor_role.cc, trainer/critic_role.cc, trainer/reward_model_role.cc,
// trainer/rollout_role.cc).
void add_actor_rollout_ref_role(runtime::RoleRegistry& roles, const Registry& components);
void add_critic_role(runtime::RoleRegistry& roles, const Registry& components);
void add_reward_model_role(runtime::RoleRegistry& roles, const Registry& components);
void add_rollout_role(runtime::RoleRegistry& roles, const Registry& components);

}  // namespace rlcore::workers
