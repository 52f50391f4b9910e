#include "rlcore/core/serve/disk_weights.h"

#include <optional>
#include <set>

#include <ATen/ATen.h>

#include "rlcore/error.h"
#include "rlcore/safetensors/safetensors.h"
#include "rlcore/string_join.h"

namespace rlcore::serve {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  return "[" + join(shape, ", ", [](int64_t d) { return std::to_string(d); }) + "]";
}

}  // namespace

NamedTensorList read_weights_like(const std::string& dir, const std::vector<WeightMeta>& meta) {
  std::optional<SafetensorsCheckpoint> checkpoint;
  try {
    checkpoint.emplace(dir);
  } catch (const Error& e) {
    throw ValueError("cannot read weights from '" + dir + "': " + e.what());
  }
  std::set<std::string> wanted;
  for (const WeightMeta& m : meta) {
    wanted.insert(m.name);
    if (!checkpoint->contains(m.name)) throw ValueError("'" + dir + "' has no tensor '" + m.name + "'");
    const SafetensorsEntry& entry = checkpoint->entry(m.name);
    if (entry.shape != m.shape) {
      throw ValueError("'" + dir + "': tensor '" + m.name + "' has shape " + shape_text(entry.shape) +
                       ", the served model's is " + shape_text(m.shape));
    }
  }
  for (const std::string& name : checkpoint->names()) {
    if (!wanted.count(name))
      throw ValueError("'" + dir + "': tensor '" + name + "' is not a parameter of the served model");
  }
  NamedTensorList weights;
  for (const WeightMeta& m : meta) weights.emplace_back(m.name, checkpoint->load(m.name).to(m.dtype));
  return weights;
}

}  // namespace rlcore::serve
