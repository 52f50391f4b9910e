// Roles on the worker side: a role object (actor, rollout, ...) registers the
// methods the controller may call, each with its dispatch mode. A RoleRegistry
// maps role types to factories; `rlcore worker` builds the roles its pool hosts.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlcore/batch.h"
#include "rlcore/comm_context.h"
#include "rlcore/core/runtime/dispatch.h"
#include "rlcore/export.h"

namespace rlcore::runtime {

// What a method returns: rows (kept per the dispatch mode) and/or a JSON value.
struct MethodResult {
  Batch batch;
  nlohmann::json value;
};

// A registered method. `batch` is this rank's input (its shard for dp/mesh
// modes, empty when the call has none); `args` is the call's JSON object.
// Exceptions are sent back to the controller as the call's error.
using Method = std::function<MethodResult(const Batch& batch, const nlohmann::json& args)>;

struct RoleContext {
  std::string role;  // the role's name in the pool ("actor")
  std::string type;  // the registered type that implements it
  nlohmann::json options = nlohmann::json::object();
  int64_t rank = 0;  // rank in the pool
  int64_t world_size = 1;
  int64_t local_rank = 0;
  std::string host;
  std::string pool;
  // Process groups of the pool; null when the run has none (runtime.process_groups=false).
  const CommContext* comm = nullptr;
  // Joins a process group with workers of other pools (join_shared_group in
  // process_groups.h: every member passes the same name and size, and its own
  // rank); empty when the run has no process groups.
  std::function<CommGroup(const std::string& name, int64_t rank, int64_t size)> join_group;
};

struct MethodSpec {
  std::string name;  // "<role>.<method>"
  DispatchMode mode = DispatchMode::kOneToAll;
  std::string mesh;  // kMeshCompute only
  Method method;
};

// The methods of every role a worker hosts, and its place in each named mesh.
class RLCORE_API MethodTable {
 public:
  // Registers `<role>.<name>` (role as given to the bound view below).
  void add(const std::string& qualified_name, DispatchMode mode, Method method, const std::string& mesh = "");
  // Declares this worker's dp rank / collect flag in `mesh` (overrides the default from the pool's mesh).
  void set_mesh_rank(const std::string& mesh, MeshRank rank);

  const MethodSpec* find(const std::string& qualified_name) const;
  const std::map<std::string, MethodSpec>& methods() const { return methods_; }
  const std::map<std::string, MeshRank>& meshes() const { return meshes_; }

 private:
  std::map<std::string, MethodSpec> methods_;
  std::map<std::string, MeshRank> meshes_;
};

// A role's registration handle: prefixes method names with the role name.
class RLCORE_API RoleMethods {
 public:
  RoleMethods(MethodTable& table, std::string role) : table_(table), role_(std::move(role)) {}
  // Throws ValueError for a duplicate name, or kMeshCompute without a mesh.
  RoleMethods& add(const std::string& name, DispatchMode mode, Method method);
  RoleMethods& add_mesh(const std::string& name, const std::string& mesh, Method method);
  void set_mesh_rank(const std::string& mesh, MeshRank rank) { table_.set_mesh_rank(mesh, rank); }

 private:
  MethodTable& table_;
  std::string role_;
};

// Makes a role object and registers its methods (capturing the object); the
// returned pointer keeps it alive for the worker's lifetime.
using RoleFactory = std::function<std::shared_ptr<void>(const RoleContext& context, RoleMethods& methods)>;

class RLCORE_API RoleRegistry {
 public:
  // Throws ValueError for a duplicate type.
  void add(const std::string& type, RoleFactory factory);
  // Throws ConfigError listing the known types.
  const RoleFactory& get(const std::string& type) const;
  std::vector<std::string> types() const;

 private:
  std::map<std::string, RoleFactory> factories_;
};

// The built-in "diag" role (echo, scale, sleep, raise, all_reduce, ...): what
// `rlcore worker --check`, the runtime tests and the benchmarks run.
RLCORE_API void add_builtin_roles(RoleRegistry& registry);

}  // namespace rlcore::runtime
