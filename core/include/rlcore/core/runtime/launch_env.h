// Where a worker learns its rank: the environment set by whoever started it.
// torchrun-style variables first, then Open MPI's, then Slurm's, so `mpirun`,
// `srun`, Kubernetes or a shell loop can all start `rlcore worker`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "rlcore/export.h"

namespace rlcore::runtime {

struct LaunchEnv {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  int64_t local_world_size = 1;
  // Controller address: RLCORE_CONTROLLER, else tcp://MASTER_ADDR:MASTER_PORT; empty when neither is set.
  std::string controller;
  // Which variables supplied the rank: "torchrun", "openmpi", "slurm" or "default".
  std::string source = "default";
};

// Looks a variable up; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment.
RLCORE_API EnvLookup process_env();
// A fixed map (tests, or an environment about to be given to a child).
RLCORE_API EnvLookup env_from_map(std::map<std::string, std::string> values);

// Reads, in order of precedence, RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE,
// OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE, SLURM_PROCID/NTASKS/LOCALID
// (and SLURM_NTASKS_PER_NODE), plus RLCORE_CONTROLLER or MASTER_ADDR/MASTER_PORT.
// Throws ConfigError naming the variable when a value is not an integer or
// the ranks are inconsistent (rank >= world size, ...).
RLCORE_API LaunchEnv parse_launch_env(const EnvLookup& env);

}  // namespace rlcore::runtime
