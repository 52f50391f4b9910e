// The `fsdp` train engine's options: verl's actor/critic keys (optim.*,
// grad_clip, fsdp_config.*) with verl's defaults, as a typed struct.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optim_options.h"
#include "rlcore/options.h"

namespace rlcore::fsdp {

using train::OptimOptions;

struct FsdpConfigOptions {
  std::string dtype = "float32";  // compute dtype; master weights and optimizer stay fp32
  bool param_offload = false;
  bool optimizer_offload = false;
};

struct FsdpOptions {
  OptimOptions optim;
  double grad_clip = 1.0;  // <= 0 disables clipping (the norm is still reported)
  FsdpConfigOptions fsdp_config;
  int64_t seed = 1;  // initialises a value head absent from the checkpoint
};

OptionsSchema<FsdpOptions> fsdp_options_schema();

}  // namespace rlcore::fsdp
