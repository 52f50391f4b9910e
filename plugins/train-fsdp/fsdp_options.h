// The `fsdp` train engine's options: verl's actor/critic keys (optim.*,
// grad_clip, fsdp_config.*) with verl's defaults, as a typed struct.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lora_adapters.h"
#include "train-common/optim_options.h"
#include "rlcore/options.h"
#include "rlcore/parallel_sizes.h"

namespace rlcore::train_fsdp {

using train_common::OptimOptions;

// verl's fsdp_config.mixed_precision (torch FSDP's MixedPrecision); the
// strings are resolved and checked by resolve_mixed_precision().
struct MixedPrecisionOptions {
  std::string param_dtype;               // compute dtype of gathered parameters; "" = fsdp_config.dtype
  std::string reduce_dtype = "float32";  // gradients are averaged over dp in this dtype
  std::string buffer_dtype = "float32";  // model buffers (the rotary inv_freq): float32 only
};

struct FsdpConfigOptions {
  std::string dtype;  // alias of mixed_precision.param_dtype; both unset: float32
  MixedPrecisionOptions mixed_precision;
  bool param_offload = false;
  bool optimizer_offload = false;
  // A mixture of experts' router losses (Megatron's key names; docs/moe.md).
  double moe_aux_loss_coeff = 0;
  double moe_z_loss_coeff = 0;
};

struct FsdpOptions {
  OptimOptions optim;
  double grad_clip = 1.0;  // <= 0 disables clipping (the norm is still reported)
  // Recompute each decoder layer in the backward pass (verl's model.enable_gradient_checkpointing).
  bool enable_gradient_checkpointing = true;
  // Micro-batches packed without padding (verl's model.use_remove_padding; docs/trainer.md#packing).
  bool use_remove_padding = true;
  // Ranks each packed sequence is split over (Ulysses; docs/train-fsdp.md#sequence-parallelism).
  int64_t ulysses_sequence_parallel_size = 1;
  FsdpConfigOptions fsdp_config;
  int64_t seed = 1;  // initialises a value head absent from the checkpoint, and the LoRA A matrices
  LoraOptions lora;
};

OptionsSchema<FsdpOptions> fsdp_options_schema();

// sp from ulysses_sequence_parallel_size, named for the core's layout errors.
ParallelSizes fsdp_parallel_sizes(const FsdpOptions& options);

}  // namespace rlcore::train_fsdp
