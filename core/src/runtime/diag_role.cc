// The built-in "diag" role: small methods covering every dispatch mode, the
// process groups and failure paths, for `rlcore worker --check`, tests and benchmarks.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "rlcore/core/runtime/role.h"
#include "rlcore/error.h"

namespace rlcore::runtime {

namespace {

MethodResult scaled(const RoleContext& context, const Batch& batch, const nlohmann::json& args) {
  const double factor = args.value("factor", 1.0);
  Batch out(batch.size());
  out.set("y", batch.tensor("x") * factor);
  out.set("rank", at::full({batch.size()}, context.rank, at::kLong));
  return {out, {{"rows", batch.size()}}};
}

void register_diag(const RoleContext& context, RoleMethods& methods) {
  methods.add("noop", DispatchMode::kOneToAll, [](const Batch&, const nlohmann::json&) { return MethodResult{}; });
  methods.add("echo", DispatchMode::kOneToAll, [context](const Batch& batch, const nlohmann::json&) {
    return MethodResult{batch, {{"rank", context.rank}}};
  });
  methods.add("echo_dp", DispatchMode::kDpCompute, [](const Batch& batch, const nlohmann::json&) {
    return MethodResult{batch, nullptr};
  });
  methods.add("info", DispatchMode::kOneToAll, [context](const Batch&, const nlohmann::json&) {
    nlohmann::json info = {
        {"rank", context.rank}, {"world_size", context.world_size},        {"local_rank", context.local_rank},
        {"host", context.host}, {"pid", static_cast<int64_t>(::getpid())}, {"threads", at::get_num_threads()},
        {"pool", context.pool}};
    info["groups"] = nlohmann::json::object();
    if (context.comm) {
      for (const auto& name : context.comm->group_names()) {
        const CommGroup& group = context.comm->group(name);
        info["groups"][name] = {{"rank", group.rank()}, {"size", group.size()}, {"ranks", group.ranks()}};
      }
    }
    return MethodResult{Batch(), info};
  });
  methods.add("scale", DispatchMode::kDpCompute,
              [context](const Batch& batch, const nlohmann::json& args) { return scaled(context, batch, args); });
  methods.add_mesh("scale_mesh", "default",
                   [context](const Batch& batch, const nlohmann::json& args) { return scaled(context, batch, args); });
  methods.add("sum_each", DispatchMode::kAllToAll, [context](const Batch& batch, const nlohmann::json&) {
    return MethodResult{Batch(), {{"rank", context.rank}, {"sum", batch.tensor("x").sum().item<double>()}}};
  });
  methods.add("leader", DispatchMode::kRankZero, [context](const Batch& batch, const nlohmann::json&) {
    Batch out = batch;
    if (batch.contains("x")) out.set("doubled", batch.tensor("x") * 2);
    return MethodResult{out, {{"rank", context.rank}}};
  });
  methods.add("big_value", DispatchMode::kOneToAll, [](const Batch&, const nlohmann::json& args) {
    return MethodResult{Batch(), std::string(args.at("bytes").get<size_t>(), 'x')};
  });
  methods.add("sleep", DispatchMode::kOneToAll, [context](const Batch&, const nlohmann::json& args) {
    std::this_thread::sleep_for(std::chrono::duration<double>(args.value("seconds", 0.0)));
    return MethodResult{Batch(), {{"rank", context.rank}}};
  });
  methods.add("sleep_each", DispatchMode::kAllToAll, [context](const Batch&, const nlohmann::json& args) {
    std::this_thread::sleep_for(std::chrono::duration<double>(args.value("seconds", 0.0)));
    return MethodResult{Batch(), {{"rank", context.rank}, {"pid", static_cast<int64_t>(::getpid())}}};
  });
  methods.add("fail", DispatchMode::kOneToAll, [context](const Batch&, const nlohmann::json& args) {
    const auto ranks = args.value("ranks", std::vector<int64_t>{});
    if (ranks.empty() || std::find(ranks.begin(), ranks.end(), context.rank) != ranks.end()) {
      throw ValueError(args.value("message", std::string("diag.fail was asked to fail")));
    }
    return MethodResult{Batch(), {{"rank", context.rank}}};
  });
  methods.add("touch", DispatchMode::kOneToAll, [context](const Batch&, const nlohmann::json& args) {
    const std::string path = args.at("path").get<std::string>() + "." + std::to_string(context.rank);
    std::ofstream(path) << "touched\n";
    return MethodResult{Batch(), {{"path", path}}};
  });
  methods.add("all_reduce", DispatchMode::kOneToAll, [context](const Batch&, const nlohmann::json& args) {
    if (!context.comm) throw ConfigError("diag.all_reduce needs process groups (runtime.process_groups=true)");
    // "late_ranks": these ranks sleep "late_s" first (the others wait in the collective).
    const auto late = args.value("late_ranks", std::vector<int64_t>{});
    if (std::find(late.begin(), late.end(), context.rank) != late.end()) {
      std::this_thread::sleep_for(std::chrono::duration<double>(args.value("late_s", 0.0)));
    }
    const CommGroup& group = context.comm->group(args.value("group", std::string("world")));
    at::Tensor value = at::full({1}, static_cast<double>(context.rank + 1), at::kDouble);
    group.all_reduce(value);
    return MethodResult{Batch(),
                        {{"rank", context.rank},
                         {"sum", value.item<double>()},
                         {"group_rank", group.rank()},
                         {"group_ranks", group.ranks()}}};
  });
}

}  // namespace

void add_builtin_roles(RoleRegistry& registry) {
  registry.add("diag", [](const RoleContext& context, RoleMethods& methods) -> std::shared_ptr<void> {
    register_diag(context, methods);
    return nullptr;
  });
}

}  // namespace rlcore::runtime
