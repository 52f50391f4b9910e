// The options schema of the `megatron` train engine (key names follow verl).
#include "megatron_options.h"

#include "train-common/micro_batches.h"

namespace rlcore::train_megatron {

OptionsSchema<MegatronOptions> megatron_options_schema() {
  OptionsSchema<MegatronConfigOptions> megatron;
  megatron
      .key("tensor_model_parallel_size", &MegatronConfigOptions::tensor_model_parallel_size,
           "Ranks one layer's weights are split over (Megatron TP); the pool's 'tp' mesh dimension.", at_least(1))
      .key("pipeline_model_parallel_size", &MegatronConfigOptions::pipeline_model_parallel_size,
           "Pipeline stages the layers are split into (Megatron PP); the pool's 'pp' mesh dimension.", at_least(1))
      .key("expert_model_parallel_size", &MegatronConfigOptions::expert_model_parallel_size,
           "Data-parallel ranks the experts of a mixture of experts are split over (Megatron EP); divides dp and "
           "num_experts.",
           at_least(1))
      .key("moe_aux_loss_coeff", &MegatronConfigOptions::moe_aux_loss_coeff,
           "Weight of the router's load-balancing loss added to the actor's loss (mixture of experts).", at_least(0.0))
      .key("moe_z_loss_coeff", &MegatronConfigOptions::moe_z_loss_coeff,
           "Weight of the router's z-loss (mean squared logsumexp of its logits) added to the actor's loss.",
           at_least(0.0))
      .key("dtype", &MegatronConfigOptions::dtype, "Compute dtype; masters and AdamW state stay float32.",
           one_of({"float32", "bfloat16"}))
      .key("param_offload", &MegatronConfigOptions::param_offload, "Keep parameters in host memory between calls.")
      .key("grad_offload", &MegatronConfigOptions::grad_offload, "Keep gradients in host memory between calls.")
      .key("optimizer_offload", &MegatronConfigOptions::optimizer_offload,
           "Keep AdamW state in host memory between optimizer steps.");
  OptionsSchema<MegatronOptions> schema;
  schema.section("optim", &MegatronOptions::optim, train_common::optim_options_schema())
      .key("grad_clip", &MegatronOptions::grad_clip, "Global gradient-norm clip; <= 0 disables clipping.")
      .key("use_remove_padding", &MegatronOptions::use_remove_padding, train_common::kUseRemovePaddingDoc)
      .section("megatron", &MegatronOptions::megatron, megatron);
  return schema;
}

ParallelSizes megatron_parallel_sizes(const MegatronOptions& options) {
  ParallelSizes sizes;
  sizes.tp = {options.megatron.tensor_model_parallel_size, "megatron.tensor_model_parallel_size"};
  sizes.pp = {options.megatron.pipeline_model_parallel_size, "megatron.pipeline_model_parallel_size"};
  sizes.ep = {options.megatron.expert_model_parallel_size, "megatron.expert_model_parallel_size"};
  return sizes;
}

}  // namespace rlcore::train_megatron
