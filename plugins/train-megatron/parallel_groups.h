// The process groups of a Megatron-style engine: tensor-parallel ("tp"),
// pipeline ("pp") and data-parallel ("dp") ranks, read from the worker's
// CommContext and checked against the configured sizes; with expert
// parallelism also "ep" (the dp ranks that split the experts) and "edp" (the
// dp ranks holding the same experts), both inside dp.
#pragma once

#include <cstdint>

#include "rlcore/comm_context.h"

namespace rlcore::train_megatron {

struct ParallelGroups {
  CommGroup tp;
  CommGroup pp;
  CommGroup dp;
  CommGroup ep;   // size 1 without expert parallelism
  CommGroup edp;  // dp without expert parallelism

  bool first_stage() const { return pp.rank() == 0; }
  bool last_stage() const { return pp.rank() == pp.size() - 1; }
};

// ConfigError naming megatron.tensor_model_parallel_size / pipeline_model_parallel_size
// and the groups found when the context's groups do not match them. Without a
// "dp" group, dp is "world" when tp = pp = 1 and a single rank when tp x pp
// covers the world. A missing context (one process) gives single-rank groups.
// ep_size > 1 needs "ep" of that size and "edp" groups (ConfigError naming
// megatron.expert_model_parallel_size otherwise).
ParallelGroups parallel_groups(const CommContext* comm, int64_t tp_size, int64_t pp_size, int64_t ep_size = 1);

}  // namespace rlcore::train_megatron
