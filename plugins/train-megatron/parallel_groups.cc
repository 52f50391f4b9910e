// Finding and checking the tp / pp / dp groups.
#include "parallel_groups.h"

#include <string>

#include "rlcore/error.h"
#include "rlcore/string_join.h"

namespace rlcore::train_megatron {
namespace {

CommGroup single(const std::string& name, int64_t rank) { return CommGroup(name, {rank}, 0); }

std::string groups_text(const CommContext& comm) {
  return join(comm.group_names(), ", ",
              [&comm](const std::string& name) { return name + " (" + std::to_string(comm.group(name).size()) + ")"; });
}

CommGroup sized_group(const CommContext* comm, const char* name, int64_t size, const char* key) {
  if (size == 1)
    return comm != nullptr && comm->has_group(name) && comm->group(name).size() == 1
               ? comm->group(name)
               : single(name, comm != nullptr ? comm->rank() : 0);
  if (comm == nullptr || !comm->has_group(name) || comm->group(name).size() != size) {
    throw ConfigError(std::string("megatron.") + key + " = " + std::to_string(size) + " needs a '" + name +
                      "' process group of that size (the pool's mesh dimension); the worker has: " +
                      (comm == nullptr ? std::string("no process groups") : groups_text(*comm)));
  }
  return comm->group(name);
}

ParallelGroups tp_pp_dp_groups(const CommContext* comm, int64_t tp_size, int64_t pp_size) {
  CommGroup tp = sized_group(comm, "tp", tp_size, "tensor_model_parallel_size");
  CommGroup pp = sized_group(comm, "pp", pp_size, "pipeline_model_parallel_size");
  if (comm == nullptr) return {tp, pp, single("dp", 0), single("ep", 0), single("edp", 0)};
  if (comm->has_group("dp")) {
    const CommGroup& dp = comm->group("dp");
    if (dp.size() * tp_size * pp_size != comm->world_size()) {
      throw ConfigError("megatron: dp (" + std::to_string(dp.size()) + ") x tensor_model_parallel_size (" +
                        std::to_string(tp_size) + ") x pipeline_model_parallel_size (" + std::to_string(pp_size) +
                        ") must equal the " + std::to_string(comm->world_size()) + " workers");
    }
    return {tp, pp, dp, single("ep", 0), single("edp", 0)};
  }
  if (tp_size * pp_size == 1) return {tp, pp, comm->world(), single("ep", 0), single("edp", 0)};
  if (tp_size * pp_size == comm->world_size())
    return {tp, pp, single("dp", comm->rank()), single("ep", 0), single("edp", 0)};
  throw ConfigError("megatron: tp x pp = " + std::to_string(tp_size * pp_size) + " ranks per replica over " +
                    std::to_string(comm->world_size()) +
                    " workers needs a 'dp' process group; the worker has: " + groups_text(*comm));
}

}  // namespace

ParallelGroups parallel_groups(const CommContext* comm, int64_t tp_size, int64_t pp_size, int64_t ep_size) {
  ParallelGroups groups = tp_pp_dp_groups(comm, tp_size, pp_size);
  if (ep_size == 1) {
    groups.ep = single("ep", comm != nullptr ? comm->rank() : 0);
    groups.edp = groups.dp;
    return groups;
  }
  if (groups.dp.size() % ep_size != 0) {
    throw ConfigError("megatron.expert_model_parallel_size = " + std::to_string(ep_size) +
                      " must divide the data-parallel size (" + std::to_string(groups.dp.size()) + ")");
  }
  groups.ep = sized_group(comm, "ep", ep_size, "expert_model_parallel_size");
  groups.edp = sized_group(comm, "edp", groups.dp.size() / ep_size, "expert_model_parallel_size");
  return groups;
}

}  // namespace rlcore::train_megatron
