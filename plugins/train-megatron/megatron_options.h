// The `megatron` train engine's options: verl's megatron actor keys
// (megatron.tensor_model_parallel_size, ...) plus the shared optim.* keys.
#pragma once

#include <cstdint>
#include <string>

#include "train-common/optim_options.h"
#include "rlcore/options.h"
#include "rlcore/parallel_sizes.h"

namespace rlcore::train_megatron {

struct MegatronConfigOptions {
  int64_t tensor_model_parallel_size = 1;
  int64_t pipeline_model_parallel_size = 1;
  int64_t expert_model_parallel_size = 1;  // dp ranks a mixture of experts' experts are split over
  double moe_aux_loss_coeff = 0.0;         // the router's load-balancing loss, added to the policy loss
  double moe_z_loss_coeff = 0.0;           // the router's z-loss (ST-MoE), added to the policy loss
  std::string dtype = "float32";           // compute dtype; master weights and AdamW state stay fp32
  bool param_offload = false;
  bool grad_offload = false;
  bool optimizer_offload = false;
};

struct MegatronOptions {
  train_common::OptimOptions optim;
  double grad_clip = 1.0;          // <= 0 disables clipping (the norm is still reported)
  bool use_remove_padding = true;  // micro-batches packed without padding
  MegatronConfigOptions megatron;
};

OptionsSchema<MegatronOptions> megatron_options_schema();

// tp, pp and ep from the megatron.* keys, named for the core's layout errors.
ParallelSizes megatron_parallel_sizes(const MegatronOptions& options);

}  // namespace rlcore::train_megatron
