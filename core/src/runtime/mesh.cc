// Mesh coordinates and sub-groups of a pool's ranks.
#include "rlcore/core/runtime/mesh.h"

#include <set>

#include <nlohmann/json.hpp>

#include "rlcore/error.h"
#include "rlcore/string_join.h"

namespace rlcore::runtime {

namespace {

std::size_t dim_index(const MeshShape& mesh, const std::string& dim) {
  for (std::size_t i = 0; i < mesh.size(); ++i) {
    if (mesh[i].name == dim) return i;
  }
  throw ValueError("the mesh has no dimension '" + dim +
                   "'; its dimensions are: " + join(mesh, ", ", [](const auto& d) { return d.name; }));
}

// The dimension `dim` is, or the dimension it is a factor of (and which factor).
std::pair<std::size_t, int64_t> find_dim(const MeshShape& mesh, const std::string& dim) {
  for (std::size_t i = 0; i < mesh.size(); ++i) {
    if (mesh[i].name == dim) return {i, -1};
    for (std::size_t f = 0; f < mesh[i].factors.size(); ++f)
      if (mesh[i].factors[f].name == dim) return {i, static_cast<int64_t>(f)};
  }
  return {dim_index(mesh, dim), -1};  // throws
}

int64_t rank_of(const MeshShape& mesh, const std::vector<int64_t>& coordinates) {
  int64_t rank = 0;
  for (std::size_t i = 0; i < mesh.size(); ++i) rank = rank * mesh[i].size + coordinates[i];
  return rank;
}

}  // namespace

void validate_mesh(const MeshShape& mesh, int64_t world_size) {
  int64_t product = 1;
  std::set<std::string> names;
  std::string text;
  for (const auto& dim : mesh) {
    if (dim.name.empty()) throw ValueError("a mesh dimension has an empty name");
    if (!names.insert(dim.name).second) throw ValueError("mesh dimension '" + dim.name + "' appears twice");
    if (dim.size < 1) throw ValueError("mesh dimension '" + dim.name + "' has size " + std::to_string(dim.size));
    product *= dim.size;
    int64_t factored = 1;
    for (const auto& factor : dim.factors) {
      if (factor.name.empty() || !names.insert(factor.name).second || factor.size < 1)
        throw ValueError("mesh dimension '" + dim.name + "': factor '" + factor.name +
                         "' is unnamed, appears twice or has size " + std::to_string(factor.size));
      factored *= factor.size;
    }
    if (!dim.factors.empty() && factored != dim.size) {
      throw ValueError("mesh dimension '" + dim.name + "' (" + std::to_string(dim.size) +
                       ") is not the product of its factors (" + std::to_string(factored) + ")");
    }
    text += (text.empty() ? "" : " x ") + dim.name + "=" + std::to_string(dim.size);
  }
  if (!mesh.empty() && product != world_size) {
    throw ValueError("mesh " + text + " has " + std::to_string(product) + " ranks but the pool has " +
                     std::to_string(world_size) + " workers");
  }
}

MeshShape mesh_or_default(const MeshShape& mesh, int64_t world_size) {
  if (mesh.empty()) return {MeshDim{"dp", world_size}};
  return mesh;
}

std::vector<int64_t> mesh_coordinates(const MeshShape& mesh, int64_t rank) {
  std::vector<int64_t> coordinates(mesh.size());
  for (std::size_t i = mesh.size(); i-- > 0;) {
    coordinates[i] = rank % mesh[i].size;
    rank /= mesh[i].size;
  }
  return coordinates;
}

std::vector<std::string> mesh_group_names(const MeshShape& mesh) {
  std::vector<std::string> names;
  for (const auto& dim : mesh) {
    names.push_back(dim.name);
    for (const auto& factor : dim.factors) names.push_back(factor.name);
  }
  return names;
}

std::vector<int64_t> mesh_group_ranks(const MeshShape& mesh, const std::string& dim, int64_t rank) {
  const auto [index, factor] = find_dim(mesh, dim);
  std::vector<int64_t> coordinates = mesh_coordinates(mesh, rank);
  std::vector<int64_t> ranks;
  if (factor < 0) {
    for (int64_t i = 0; i < mesh[index].size; ++i) {
      coordinates[index] = i;
      ranks.push_back(rank_of(mesh, coordinates));
    }
    return ranks;
  }
  // The dimension's coordinate as the factors' coordinates (row-major); vary one.
  const MeshShape& factors = mesh[index].factors;
  std::vector<int64_t> within = mesh_coordinates(factors, coordinates[index]);
  for (int64_t i = 0; i < factors[static_cast<std::size_t>(factor)].size; ++i) {
    within[static_cast<std::size_t>(factor)] = i;
    coordinates[index] = rank_of(factors, within);
    ranks.push_back(rank_of(mesh, coordinates));
  }
  return ranks;
}

MeshRank default_mesh_rank(const MeshShape& mesh, int64_t rank) {
  const std::vector<int64_t> coordinates = mesh_coordinates(mesh, rank);
  MeshRank place;
  for (std::size_t i = 0; i < mesh.size(); ++i) {
    if (mesh[i].name == "dp") {
      place.dp_rank = coordinates[i];
      place.dp_size = mesh[i].size;
    } else if (mesh[i].name == "pp") {
      place.collect = place.collect && coordinates[i] == mesh[i].size - 1;
    } else {
      place.collect = place.collect && coordinates[i] == 0;
    }
  }
  return place;
}

nlohmann::json mesh_to_json(const MeshShape& mesh) {
  nlohmann::json dims = nlohmann::json::array();
  for (const auto& dim : mesh) {
    nlohmann::json entry = {dim.name, dim.size};
    if (!dim.factors.empty()) entry.push_back(mesh_to_json(dim.factors));
    dims.push_back(entry);
  }
  return dims;
}

MeshShape mesh_from_json(const nlohmann::json& json) {
  MeshShape mesh;
  for (const auto& dim : json) {
    mesh.push_back(MeshDim{dim.at(0).get<std::string>(), dim.at(1).get<int64_t>(), {}});
    if (dim.size() > 2) mesh.back().factors = mesh_from_json(dim.at(2));
  }
  return mesh;
}

}  // namespace rlcore::runtime
