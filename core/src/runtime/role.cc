// MethodTable, RoleMethods and RoleRegistry.
#include "rlcore/core/runtime/role.h"

#include "rlcore/error.h"
#include "rlcore/string_join.h"

namespace rlcore::runtime {

void MethodTable::add(const std::string& qualified_name, DispatchMode mode, Method method, const std::string& mesh) {
  if (!method) throw ValueError("method '" + qualified_name + "' has no function");
  if (mode == DispatchMode::kMeshCompute && mesh.empty()) {
    throw ValueError("method '" + qualified_name + "' uses mesh_compute but names no mesh");
  }
  if (!methods_.emplace(qualified_name, MethodSpec{qualified_name, mode, mesh, std::move(method)}).second) {
    throw ValueError("method '" + qualified_name + "' is registered twice");
  }
}

void MethodTable::set_mesh_rank(const std::string& mesh, MeshRank rank) {
  if (rank.dp_size < 1 || rank.dp_rank < 0 || rank.dp_rank >= rank.dp_size) {
    throw ValueError("mesh '" + mesh + "': dp rank " + std::to_string(rank.dp_rank) + " is outside [0, " +
                     std::to_string(rank.dp_size) + ")");
  }
  meshes_[mesh] = rank;
}

const MethodSpec* MethodTable::find(const std::string& qualified_name) const {
  auto it = methods_.find(qualified_name);
  return it == methods_.end() ? nullptr : &it->second;
}

RoleMethods& RoleMethods::add(const std::string& name, DispatchMode mode, Method method) {
  table_.add(role_ + "." + name, mode, std::move(method));
  return *this;
}

RoleMethods& RoleMethods::add_mesh(const std::string& name, const std::string& mesh, Method method) {
  table_.add(role_ + "." + name, DispatchMode::kMeshCompute, std::move(method), mesh);
  return *this;
}

void RoleRegistry::add(const std::string& type, RoleFactory factory) {
  if (!factories_.emplace(type, std::move(factory)).second) {
    throw ValueError("role type '" + type + "' is registered twice");
  }
}

const RoleFactory& RoleRegistry::get(const std::string& type) const {
  auto it = factories_.find(type);
  if (it != factories_.end()) return it->second;
  const std::string known = join(factories_, ", ", [](const auto& entry) { return entry.first; });
  throw ConfigError("no role type '" + type + "'; known role types: " + (known.empty() ? "(none)" : known));
}

std::vector<std::string> RoleRegistry::types() const {
  std::vector<std::string> names;
  for (const auto& [name, factory] : factories_) names.push_back(name);
  return names;
}

}  // namespace rlcore::runtime
