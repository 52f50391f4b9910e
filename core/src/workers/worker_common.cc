// Shared pieces of the trainer's worker roles (see trainer/worker_common.h).
#include "workers/worker_common.h"

#include "rlcore/comm_context.h"
#include "rlcore/core/workers/roles.h"
#include "rlcore/device.h"
#include "rlcore/error.h"

namespace rlcore::workers {

ConfigNode role_config(const runtime::RoleContext& context) {
  if (!context.options.contains(role_options::kConfig)) {
    throw ConfigError("role '" + context.role + "' was started without the run config");
  }
  return ConfigNode::parse(context.options.at(role_options::kConfig).get<std::string>(), "the controller's run config");
}

std::string worker_device(const runtime::RoleContext& context) {
  const ConfigNode device = role_config(context).at_path("trainer.device");
  const std::string requested = device.defined() ? device.as<std::string>() : "auto";
  return resolve_device(requested, context.local_rank, "trainer.device").str();
}

std::shared_ptr<TrainEngine> make_train_engine(const Registry& components, const runtime::RoleContext& context,
                                               const EngineRequest& request) {
  ComponentContext component;
  component.device = worker_device(context);
  component.model_path = request.model_path;
  component.comm = context.comm;
  component.model_head = request.model_head;
  component.trainable = request.trainable;
  component.total_training_steps = request.total_training_steps;
  return components.create<TrainEngine>(request.strategy, request.options, component);
}

int64_t dp_size(const runtime::RoleContext& context) {
  if (context.comm && context.comm->has_group("dp")) return context.comm->group("dp").size();
  return context.world_size;
}

UpdateReply run_updates(TrainEngine& engine, const Batch& rows, int64_t mini_batch_rows, int64_t epochs,
                        const ForwardOptions& options, const LossFunction& loss) {
  if (mini_batch_rows <= 0 || rows.size() % mini_batch_rows != 0) {
    throw ValueError("a worker got " + std::to_string(rows.size()) + " rows, not a multiple of its mini-batch of " +
                     std::to_string(mini_batch_rows) + " rows");
  }
  std::map<std::string, double> sums;
  int64_t steps = 0;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    for (const Batch& mini_batch : rows.split(mini_batch_rows)) {
      for (const auto& [name, value] : engine.train_step(mini_batch, options, loss).metrics) sums[name] += value;
      ++steps;
    }
  }
  for (auto& [name, value] : sums) value /= static_cast<double>(steps);
  return update_reply(std::move(sums));
}

UpdateReply update_reply(std::map<std::string, double> metrics) {
  UpdateReply reply;
  if (auto lr = metrics.find("lr"); lr != metrics.end()) {
    reply.lr = lr->second;
    metrics.erase(lr);
  }
  if (auto grad_norm = metrics.find("grad_norm"); grad_norm != metrics.end()) {
    reply.grad_norm = grad_norm->second;
    reply.has_grad_norm = true;
    metrics.erase(grad_norm);
  }
  for (auto it = metrics.begin(); it != metrics.end();) {
    const bool engine_own = it->first.find('/') == std::string::npos;
    if (engine_own) reply.engine_metrics.insert(*it);
    it = engine_own ? metrics.erase(it) : std::next(it);
  }
  reply.metrics = std::move(metrics);
  return reply;
}

}  // namespace rlcore::workers

namespace rlcore::workers {

void add_trainer_roles(runtime::RoleRegistry& roles, const Registry& components) {
  workers::add_actor_rollout_ref_role(roles, components);
  workers::add_critic_role(roles, components);
  workers::add_reward_model_role(roles, components);
  workers::add_rollout_role(roles, components);
}

}  // namespace rlcore::workers
