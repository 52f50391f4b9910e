// The options schema of the `megatron` train engine (key names follow verl).
#include "megatron_options.h"

namespace rlcore::train_megatron {

OptionsSchema<MegatronOptions> megatron_options_schema() {
  OptionsSchema<MegatronConfigOptions> megatron;
  megatron
      .key("tensor_model_parallel_size", &MegatronConfigOptions::tensor_model_parallel_size,
           "Ranks one layer's weights are split over (Megatron TP); the pool's 'tp' mesh dimension.", at_least(1))
      .key("pipeline_model_parallel_size", &MegatronConfigOptions::pipeline_model_parallel_size,
           "Pipeline stages the layers are split into (Megatron PP); the pool's 'pp' mesh dimension.", at_least(1))
      .key("dtype", &MegatronConfigOptions::dtype, "Compute dtype; masters and AdamW state stay float32.",
           one_of({"float32", "bfloat16"}))
      .key("param_offload", &MegatronConfigOptions::param_offload, "Keep parameters in host memory between calls.")
      .key("grad_offload", &MegatronConfigOptions::grad_offload, "Keep gradients in host memory between calls.")
      .key("optimizer_offload", &MegatronConfigOptions::optimizer_offload,
           "Keep AdamW state in host memory between optimizer steps.");
  OptionsSchema<MegatronOptions> schema;
  schema.section("optim", &MegatronOptions::optim, train_common::optim_options_schema())
      .key("grad_clip", &MegatronOptions::grad_clip, "Global gradient-norm clip; <= 0 disables clipping.")
      .section("megatron", &MegatronOptions::megatron, megatron);
  return schema;
}

}  // namespace rlcore::train_megatron
