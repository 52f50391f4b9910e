// The options schema of the `fsdp` train engine (key names and defaults follow verl).
#include "fsdp_options.h"

#include "rlcore/error.h"

namespace rlcore::fsdp {

OptionsSchema<FsdpOptions> fsdp_options_schema() {
  OptionsSchema<OptimOptions> optim;
  optim.key("lr", &OptimOptions::lr, "Peak learning rate of AdamW.", at_least(0))
      .key("betas", &OptimOptions::betas, "AdamW (beta1, beta2).")
      .key("eps", &OptimOptions::eps, "AdamW epsilon.", greater_than(0))
      .key("weight_decay", &OptimOptions::weight_decay, "Decoupled weight decay (torch AdamW), on every parameter.",
           at_least(0))
      .key("lr_warmup_steps", &OptimOptions::lr_warmup_steps,
           "Linear warmup steps; negative takes lr_warmup_steps_ratio * total training steps.")
      .key("lr_warmup_steps_ratio", &OptimOptions::lr_warmup_steps_ratio,
           "Warmup steps as a fraction of the total training steps.", in_range(0, 1))
      .key("lr_scheduler_type", &OptimOptions::lr_scheduler_type, "Schedule after warmup.",
           one_of({"constant", "cosine"}))
      .key("warmup_style", &OptimOptions::warmup_style,
           "Deprecated name of lr_scheduler_type (constant | cosine); overrides it when set, as in verl.")
      .key("min_lr_ratio", &OptimOptions::min_lr_ratio, "Cosine: the final lr as a fraction of lr.", in_range(0, 1))
      .key("num_cycles", &OptimOptions::num_cycles, "Cosine: waves over the run (0.5 = one half-wave down).",
           at_least(0))
      .key("total_training_steps", &OptimOptions::total_training_steps,
           "Steps the schedule spans; negative takes the trainer's total.");
  OptionsSchema<FsdpConfigOptions> fsdp_config;
  fsdp_config
      .key("dtype", &FsdpConfigOptions::dtype, "Compute dtype of gathered parameters; masters stay float32.",
           one_of({"float32", "bfloat16"}))
      .key("param_offload", &FsdpConfigOptions::param_offload,
           "Keep parameter shards in host memory between calls.")
      .key("optimizer_offload", &FsdpConfigOptions::optimizer_offload,
           "Keep AdamW state in host memory between optimizer steps.");
  OptionsSchema<FsdpOptions> schema;
  schema.section("optim", &FsdpOptions::optim, optim)
      .key("grad_clip", &FsdpOptions::grad_clip, "Global gradient-norm clip; <= 0 disables clipping.")
      .section("fsdp_config", &FsdpOptions::fsdp_config, fsdp_config)
      .key("seed", &FsdpOptions::seed, "Seed of a value head initialised fresh (critic from an LM checkpoint).",
           at_least(0));
  return schema;
}

std::string scheduler_type(const OptimOptions& optim) {
  if (optim.warmup_style.empty()) return optim.lr_scheduler_type;
  if (optim.warmup_style != "constant" && optim.warmup_style != "cosine")
    throw ConfigError("optim.warmup_style: '" + optim.warmup_style + "' is not one of: constant, cosine");
  return optim.warmup_style;
}

}  // namespace rlcore::fsdp
