// Weights an engine can load from a checkpoint directory on disk: what the
// dev-mode reload routes of `rlcore serve` read.
#pragma once

#include <string>
#include <vector>

#include "rlcore/export.h"
#include "rlcore/inference_engine.h"

namespace rlcore::serve {

// The tensors of the HF checkpoint at `dir` that `meta` lists, converted to
// meta's dtypes. Everything is checked before anything is returned: ValueError
// naming the directory and tensor for a missing or unreadable checkpoint, a
// missing tensor, one the engine does not have, or a wrong shape.
RLCORE_API NamedTensorList read_weights_like(const std::string& dir, const std::vector<WeightMeta>& meta);

}  // namespace rlcore::serve
