// get_constant_schedule_with_warmup / verl's get_cosine_schedule_with_warmup.
#include "lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "rlcore/error.h"

namespace rlcore::train_common {

LrSchedule::LrSchedule(double base_lr, std::string type, int64_t warmup_steps, int64_t total_steps, double min_lr_ratio,
                       double num_cycles)
    : base_lr_(base_lr),
      type_(std::move(type)),
      warmup_steps_(std::max<int64_t>(0, warmup_steps)),
      total_steps_(total_steps),
      min_lr_ratio_(min_lr_ratio),
      num_cycles_(num_cycles) {
  if (type_ != "constant" && type_ != "cosine")
    throw ConfigError("optim.lr_scheduler_type: unknown schedule '" + type_ + "' (constant, cosine)");
  if (type_ == "cosine" && total_steps_ <= 0) {
    throw ConfigError(
        "optim.lr_scheduler_type: cosine needs the total training steps (trainer total or "
        "optim.total_training_steps), got " +
        std::to_string(total_steps_));
  }
}

double LrSchedule::lr(int64_t step) const {
  if (step < warmup_steps_)
    return base_lr_ * static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup_steps_));
  if (type_ == "constant") return base_lr_;
  const double progress = static_cast<double>(step - warmup_steps_) /
                          static_cast<double>(std::max<int64_t>(1, total_steps_ - warmup_steps_));
  const double x = std::cos(M_PI * num_cycles_ * 2.0 * progress);
  const double coef = (1.0 - min_lr_ratio_) * 0.5;
  const double intercept = (1.0 + min_lr_ratio_) * 0.5;
  return base_lr_ * std::max(0.0, x * coef + intercept);
}

}  // namespace rlcore::train_common
