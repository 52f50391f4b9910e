// The optimizer keys every train engine shares (verl's actor/critic `optim.*`
// with verl's defaults), and the learning-rate schedule they describe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lr_schedule.h"
#include "rlcore/options.h"

namespace rlcore::train_common {

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

OptionsSchema<OptimOptions> optim_options_schema();

// The schedule type after resolving the two verl names ("constant" | "cosine");
// ConfigError naming optim.warmup_style for another value there.
std::string scheduler_type(const OptimOptions& optim);

// The schedule of `optim` over `run_total_steps` (the trainer's total, used
// unless optim.total_training_steps overrides it). ConfigError for bad betas.
LrSchedule make_lr_schedule(const OptimOptions& optim, int64_t run_total_steps);

}  // namespace rlcore::train_common
