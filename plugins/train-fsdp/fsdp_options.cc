// The options schema of the `fsdp` train engine (key names and defaults follow verl).
#include "fsdp_options.h"

#include "mixed_precision.h"
#include "train-common/micro_batches.h"
#include "rlcore/error.h"

namespace rlcore::train_fsdp {

namespace {

// "" (the default) means unset: the other key decides, else float32.
std::vector<std::string> unset_or_precision() {
  std::vector<std::string> names = precision_names();
  names.insert(names.begin(), "");
  return names;
}

}  // namespace

OptionsSchema<FsdpOptions> fsdp_options_schema() {
  OptionsSchema<MixedPrecisionOptions> mixed_precision;
  mixed_precision
      .key("param_dtype", &MixedPrecisionOptions::param_dtype,
           "Compute dtype of gathered parameters and activations (torch FSDP's MixedPrecision.param_dtype); "
           "unset: fsdp_config.dtype, else float32. Masters, gradient shards and AdamW stay float32.",
           one_of(unset_or_precision()))
      .key("reduce_dtype", &MixedPrecisionOptions::reduce_dtype,
           "Dtype gradients are averaged over dp in. 16-bit halves NCCL traffic; Gloo cannot sum bf16, so there "
           "each rank's gradient and the sum are rounded to it around an fp32 sum.",
           one_of(precision_names()))
      .key("buffer_dtype", &MixedPrecisionOptions::buffer_dtype,
           "Dtype of model buffers: float32 only (the one buffer, the rotary inv_freq, feeds fp32 angles as in HF).",
           one_of({"fp32", "float32"}));
  OptionsSchema<FsdpConfigOptions> fsdp_config;
  fsdp_config
      .key("dtype", &FsdpConfigOptions::dtype,
           "Alias of mixed_precision.param_dtype (verl reads it when mixed_precision is absent); both unset: "
           "float32. Setting both to different dtypes is an error.",
           one_of(unset_or_precision()))
      .section("mixed_precision", &FsdpConfigOptions::mixed_precision, mixed_precision)
      .key("param_offload", &FsdpConfigOptions::param_offload, "Keep parameter shards in host memory between calls.")
      .key("optimizer_offload", &FsdpConfigOptions::optimizer_offload,
           "Keep AdamW state in host memory between optimizer steps.")
      .key("moe_aux_loss_coeff", &FsdpConfigOptions::moe_aux_loss_coeff,
           "A mixture of experts: adds this times the router's load-balancing loss (transformers' definition, "
           "over every sparse layer; reported as actor/moe_aux_loss) to the loss.",
           at_least(0))
      .key("moe_z_loss_coeff", &FsdpConfigOptions::moe_z_loss_coeff,
           "A mixture of experts: adds this times the router z-loss (Megatron's per layer: the mean over tokens of "
           "logsumexp(router logits)^2; averaged over the sparse layers, reported as actor/moe_z_loss) to the loss.",
           at_least(0));
  OptionsSchema<FsdpOptions> schema;
  schema.section("optim", &FsdpOptions::optim, train_common::optim_options_schema())
      .key("grad_clip", &FsdpOptions::grad_clip, "Global gradient-norm clip; <= 0 disables clipping.")
      .key("enable_gradient_checkpointing", &FsdpOptions::enable_gradient_checkpointing,
           "Recompute each decoder layer in the backward pass (verl's model.enable_gradient_checkpointing). "
           "false keeps every layer's activations and gathered parameters from the forward: one forward "
           "fewer, the memory of an unsharded model in the compute dtype.")
      .key("use_remove_padding", &FsdpOptions::use_remove_padding, train_common::kUseRemovePaddingDoc)
      .key("ulysses_sequence_parallel_size", &FsdpOptions::ulysses_sequence_parallel_size,
           "Ranks each packed micro-batch's tokens are split over (Ulysses sequence parallelism): they hold the "
           "same rows, every layer runs on a 1/N slice and attention exchanges heads for the whole sequence with "
           "all-to-alls, so activation memory per rank falls as 1/N. Divides the attention and key-value heads; "
           "needs use_remove_padding; dense models.",
           at_least(1))
      .section("fsdp_config", &FsdpOptions::fsdp_config, fsdp_config)
      .key("seed", &FsdpOptions::seed,
           "Seed of a value head initialised fresh (critic from an LM checkpoint) and of the LoRA A matrices.",
           at_least(0))
      .section("lora", &FsdpOptions::lora, lora_options_schema());
  return schema;
}

ParallelSizes fsdp_parallel_sizes(const FsdpOptions& options) {
  ParallelSizes sizes;
  sizes.sp = {options.ulysses_sequence_parallel_size, "ulysses_sequence_parallel_size"};
  return sizes;
}

}  // namespace rlcore::train_fsdp
