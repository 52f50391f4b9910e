// Learning-rate schedules with transformers' semantics (what verl's FSDP
// workers use): linear warmup, then constant or cosine down to min_lr_ratio.
#pragma once

#include <cstdint>
#include <string>

namespace rlcore::train_common {

class LrSchedule {
 public:
  // `type`: "constant" | "cosine"; `total_steps` may be 0 (unknown) for constant.
  LrSchedule(double base_lr, std::string type, int64_t warmup_steps, int64_t total_steps, double min_lr_ratio,
             double num_cycles);

  // The learning rate of the optimizer step with 0-based index `step`.
  double lr(int64_t step) const;
  int64_t warmup_steps() const { return warmup_steps_; }

 private:
  double base_lr_;
  std::string type_;
  int64_t warmup_steps_;
  int64_t total_steps_;
  double min_lr_ratio_;
  double num_cycles_;
};

}  // namespace rlcore::train_common
