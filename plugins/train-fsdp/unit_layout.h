// How the model's parameters are cut into FSDP units (embeddings, one per
// decoder layer, final norm + head) and each unit's flat buffer into dp shards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rlcore/model/transformer.h"

namespace rlcore::train_fsdp {

struct UnitParam {
  std::string name;  // HF name
  std::vector<int64_t> shape;
  int64_t offset = 0;  // first element in the unit's flat buffer
  int64_t numel = 0;
};

// A unit's flat buffer holds its parameters back to back (model order),
// padded to a multiple of the dp size; dp rank r owns
// [r * shard_size, (r + 1) * shard_size).
struct UnitLayout {
  std::string name;  // "embed", "layer.N", "head"
  std::vector<UnitParam> params;
  int64_t numel = 0;  // without padding
  int64_t dp_size = 1;
  int64_t shard_size = 0;  // ceil(numel / dp_size)

  int64_t padded() const { return shard_size * dp_size; }
  bool operator==(const UnitLayout& other) const;  // names, shapes and offsets
};

struct ElementRange {
  int64_t begin = 0;
  int64_t end = 0;  // exclusive
  int64_t size() const { return end > begin ? end - begin : 0; }
};

// The units in model order: "embed" (model.embed_tokens.*), "layer.N"
// (model.layers.N.*), "head" (everything after: final norm, lm_head or score).
// Tied embeddings stay in "embed" only; the head borrows that unit.
std::vector<UnitLayout> build_unit_layouts(const std::vector<model::ParameterSpec>& specs, int64_t dp_size);

// The unpadded elements of `layout` owned by dp rank `rank`, in flat coordinates.
ElementRange owned_range(const UnitLayout& layout, int64_t rank);
ElementRange intersect(const ElementRange& a, const ElementRange& b);

// The layout without its dp split, as stored in checkpoints.
nlohmann::json unit_layout_to_json(const UnitLayout& layout);
UnitLayout unit_layout_from_json(const nlohmann::json& json, int64_t dp_size);

}  // namespace rlcore::train_fsdp
