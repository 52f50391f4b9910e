// The process groups of a Megatron-style engine: tensor-parallel ("tp"),
// pipeline ("pp") and data-parallel ("dp") ranks, read from the worker's
// CommContext and checked against the configured sizes.
#pragma once

#include <cstdint>

#include "rlcore/comm_context.h"

namespace rlcore::train_megatron {

struct ParallelGroups {
  CommGroup tp;
  CommGroup pp;
  CommGroup dp;

  bool first_stage() const { return pp.rank() == 0; }
  bool last_stage() const { return pp.rank() == pp.size() - 1; }
};

// ConfigError naming megatron.tensor_model_parallel_size / pipeline_model_parallel_size
// and the groups found when the context's groups do not match them. Without a
// "dp" group, dp is "world" when tp = pp = 1 and a single rank when tp x pp
// covers the world. A missing context (one process) gives single-rank groups.
ParallelGroups parallel_groups(const CommContext* comm, int64_t tp_size, int64_t pp_size);

}  // namespace rlcore::train_megatron
