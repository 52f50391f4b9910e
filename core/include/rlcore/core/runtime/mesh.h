// A pool's device mesh: named dimensions (e.g. pp x dp x tp) laid over its ranks
// row-major (the last dimension varies fastest), the sub-group along each
// dimension, and the default dp rank / collect rank of every worker.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rlcore/core/runtime/dispatch.h"
#include "rlcore/export.h"

namespace rlcore::runtime {

struct MeshDim {
  std::string name;
  int64_t size = 1;
  // Optional named factors of this dimension (row-major, sizes multiplying to
  // `size`), each with a group of its own as well: e.g. dp = edp x ep, the
  // expert-data-parallel and expert-parallel groups inside data parallelism.
  std::vector<MeshDim> factors;
};
using MeshShape = std::vector<MeshDim>;

// ValueError unless the sizes are >= 1, names (factors' too) unique and
// non-empty, the product equals `world_size` and factors multiply to their dimension.
RLCORE_API void validate_mesh(const MeshShape& mesh, int64_t world_size);
// {dp: world_size} when `mesh` is empty, else `mesh`.
RLCORE_API MeshShape mesh_or_default(const MeshShape& mesh, int64_t world_size);

// Every dimension and factor name, in mesh order (a dimension before its factors).
RLCORE_API std::vector<std::string> mesh_group_names(const MeshShape& mesh);
RLCORE_API std::vector<int64_t> mesh_coordinates(const MeshShape& mesh, int64_t rank);
// The ranks that differ from `rank` only along `dim` (a dimension or a
// factor of one), in order. ValueError for an unknown dim.
RLCORE_API std::vector<int64_t> mesh_group_ranks(const MeshShape& mesh, const std::string& dim, int64_t rank);

// The dp shard of `rank` (its "dp" coordinate; 0 of 1 without a dp dimension)
// and whether its result is kept: every dimension other than dp at 0, except
// "pp" at its last stage (where the outputs are).
RLCORE_API MeshRank default_mesh_rank(const MeshShape& mesh, int64_t rank);

RLCORE_API nlohmann::json mesh_to_json(const MeshShape& mesh);
RLCORE_API MeshShape mesh_from_json(const nlohmann::json& json);

}  // namespace rlcore::runtime
