// The `fsdp` train engine's options: verl's actor/critic keys (optim.*,
// grad_clip, fsdp_config.*) with verl's defaults, as a typed struct.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rlcore/options.h"

namespace rlcore::fsdp {

struct OptimOptions {
  double lr = 1e-6;
  std::vector<double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.01;
  int64_t lr_warmup_steps = -1;  // -1: take lr_warmup_steps_ratio * total steps
  double lr_warmup_steps_ratio = 0.0;
  std::string lr_scheduler_type = "constant";
  std::string warmup_style;  // verl's deprecated name of lr_scheduler_type; wins when set (as in verl)
  double min_lr_ratio = 0.0;
  double num_cycles = 0.5;
  // verl's total_training_steps override; -1 takes ComponentContext::total_training_steps.
  int64_t total_training_steps = -1;
};

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

// The schedule type after resolving the two verl names ("constant" | "cosine");
// ConfigError naming optim.warmup_style for another value there.
std::string scheduler_type(const OptimOptions& optim);

}  // namespace rlcore::fsdp
