// The shared optimizer keys and the schedule they build.
#include "optim_options.h"

#include "rlcore/error.h"

namespace rlcore::train_common {

OptionsSchema<OptimOptions> optim_options_schema() {
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
  return optim;
}

std::string scheduler_type(const OptimOptions& optim) {
  if (optim.warmup_style.empty()) return optim.lr_scheduler_type;
  if (optim.warmup_style != "constant" && optim.warmup_style != "cosine")
    throw ConfigError("optim.warmup_style: '" + optim.warmup_style + "' is not one of: constant, cosine");
  return optim.warmup_style;
}

LrSchedule make_lr_schedule(const OptimOptions& o, int64_t run_total_steps) {
  if (o.betas.size() != 2 || o.betas[0] < 0 || o.betas[0] >= 1 || o.betas[1] < 0 || o.betas[1] >= 1)
    throw ConfigError("optim.betas: expected two values in [0, 1), e.g. [0.9, 0.999]");
  const int64_t total = o.total_training_steps > 0 ? o.total_training_steps : run_total_steps;
  const int64_t warmup = o.lr_warmup_steps >= 0
                             ? o.lr_warmup_steps
                             : static_cast<int64_t>(o.lr_warmup_steps_ratio * static_cast<double>(total));
  return LrSchedule(o.lr, scheduler_type(o), warmup, total, o.min_lr_ratio, o.num_cycles);
}

}  // namespace rlcore::train_common
