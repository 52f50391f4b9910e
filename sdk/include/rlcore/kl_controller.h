// The KL coefficient of the in-reward KL penalty (verl's algorithm.kl_ctrl):
// a fixed or an adaptive controller, and the penalty's application to the
// token-level scores (verl's apply_kl_penalty).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>

#include "rlcore/export.h"
#include "rlcore/options.h"

namespace rlcore {

// algorithm.kl_ctrl.*, with verl's defaults.
struct KlControlConfig {
  std::string type = "fixed";  // fixed | adaptive
  double kl_coef = 0.001;      // the (initial) coefficient beta
  int64_t horizon = 10000;     // adaptive: samples over which the error is corrected
  double target_kl = 0.1;      // adaptive: the KL the controller steers to
};

// The declared keys of KlControlConfig, for the trainer's config schema.
RLCORE_API const OptionsSchema<KlControlConfig>& kl_control_schema();

class RLCORE_API KlController {
 public:
  virtual ~KlController();
  double value() const { return value_; }
  // Called once per step with the batch's mean KL and its number of samples.
  virtual void update(double current_kl, int64_t n_steps) = 0;

 protected:
  explicit KlController(double value) : value_(value) {}
  double value_;
};

class RLCORE_API FixedKlController : public KlController {
 public:
  explicit FixedKlController(double kl_coef);
  void update(double current_kl, int64_t n_steps) override;
};

// Ziegler et al. 2019 (arXiv 1909.08593):
//   error = clip(current_kl / target_kl - 1, -0.2, 0.2)
//   value *= 1 + error * n_steps / horizon
class RLCORE_API AdaptiveKlController : public KlController {
 public:
  // Throws ValueError unless horizon > 0 and target_kl > 0.
  AdaptiveKlController(double init_kl_coef, double target_kl, int64_t horizon);
  void update(double current_kl, int64_t n_steps) override;

 private:
  double target_;
  int64_t horizon_;
};

// Throws ValueError for a type other than fixed / adaptive.
RLCORE_API std::unique_ptr<KlController> make_kl_controller(const KlControlConfig& config);

struct KlInRewardResult {
  at::Tensor token_level_rewards;  // [B, T]: token_level_scores - beta * kl * response_mask
  double current_kl = 0.0;         // mean over rows of each row's masked mean KL
  double beta = 0.0;               // the coefficient used (before this step's update)
};

// verl's apply_kl_penalty: kl = kl_penalty(old_log_prob, ref_log_prob, type) * mask,
// rewards = scores - beta * kl, then controller.update(current_kl, batch size).
// Metrics: actor/reward_kl_penalty = current_kl, actor/reward_kl_penalty_coeff = beta.
RLCORE_API KlInRewardResult apply_kl_penalty(const at::Tensor& token_level_scores, const at::Tensor& old_log_prob,
                                             const at::Tensor& ref_log_prob, const at::Tensor& response_mask,
                                             KlController& controller, const std::string& kl_penalty_type = "kl");

}  // namespace rlcore
